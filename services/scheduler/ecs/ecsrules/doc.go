// Package ecsrules holds the ECS API reference's own rules that every ECS package of the
// scheduler shares (control for clusters, task definitions, instances and tasks; service
// for services and task sets): the name rule (ValidName) and the tag rules
// (ValidateTags). What every AWS service shares is in platform/awsapi.
package ecsrules
