"""The deploy loop of Python deploy tools built on boto3 (the pattern of fabfuel/ecs-deploy):
describe the service's task definition, build register_task_definition's arguments from it
(family, containerDefinitions, volumes and placementConstraints always, as such tools pass
them, plus every other member the description has except the read-only ones), change the
image and the environment, register, update the service and wait for it to be stable.

Usage: python3 deploy_boto3.py SERVICE NEW_IMAGE (endpoint and credentials from AWS_*).
"""
import json
import sys

import boto3

READ_ONLY = {"taskDefinitionArn", "revision", "status", "requiresAttributes", "compatibilities",
             "registeredAt", "registeredBy", "deregisteredAt"}
ALWAYS = ("family", "containerDefinitions", "volumes", "placementConstraints")


def main(service, image):
    ecs = boto3.client("ecs")
    current = ecs.describe_services(services=[service])["services"][0]["taskDefinition"]
    td = ecs.describe_task_definition(taskDefinition=current)["taskDefinition"]
    args = {k: v for k, v in td.items() if k not in READ_ONLY}
    for k in ALWAYS:
        # A tool copies these members as they were described: a missing one is None, which
        # boto3's parameter validation refuses before sending.
        args[k] = td.get(k)
    container = args["containerDefinitions"][0]
    container["image"] = image
    container["environment"] = container.get("environment", []) + [{"name": "VERSION", "value": "2"}]
    new = ecs.register_task_definition(**args)["taskDefinition"]["taskDefinitionArn"]
    print("registered", new)
    ecs.update_service(service=service, taskDefinition=new)
    ecs.get_waiter("services_stable").wait(services=[service], WaiterConfig={"Delay": 2, "MaxAttempts": 90})
    print("stable")
    s = ecs.describe_services(services=[service])["services"][0]
    print(json.dumps({"taskDefinition": s["taskDefinition"], "running": s["runningCount"],
                      "desired": s["desiredCount"], "deployments": len(s["deployments"])}))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
