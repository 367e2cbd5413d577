#!/usr/bin/env bash
# The deploy loop of bash deploy tools built on the AWS CLI and jq (the pattern of
# silinternational/ecs-deploy): describe the service's task definition, copy it with jq
# keeping the members such tools always copy (family, volumes, containerDefinitions,
# placementConstraints — null when the description lacks them) and dropping the read-only
# ones, change the image and the environment, register the copy with --cli-input-json,
# point the service at it and wait for the service to be stable.
# Usage: deploy_cli.sh SERVICE NEW_IMAGE
set -euo pipefail
SERVICE=$1 IMAGE=$2
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

TD=$(aws ecs describe-services --services "$SERVICE" --query 'services[0].taskDefinition' --output text)
aws ecs describe-task-definition --task-definition "$TD" > "$WORK/described.json"
jq --arg image "$IMAGE" '.taskDefinition
  | {family, volumes, containerDefinitions, placementConstraints}
    + del(.taskDefinitionArn, .revision, .status, .requiresAttributes, .compatibilities,
          .registeredAt, .registeredBy, .deregisteredAt)
  | .containerDefinitions[0].image = $image
  | .containerDefinitions[0].environment += [{"name": "VERSION", "value": "2"}]' \
  "$WORK/described.json" > "$WORK/register.json"
NEW=$(aws ecs register-task-definition --cli-input-json "file://$WORK/register.json" \
  --query 'taskDefinition.taskDefinitionArn' --output text)
echo "registered $NEW"
aws ecs update-service --service "$SERVICE" --task-definition "$NEW" --query 'service.serviceName' --output text
aws ecs wait services-stable --services "$SERVICE"
echo "stable"
aws ecs describe-services --services "$SERVICE" \
  --query 'services[0].{taskDefinition:taskDefinition,running:runningCount,desired:desiredCount,deployments:length(deployments)}'
