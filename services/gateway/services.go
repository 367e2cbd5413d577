package gateway

import (
	"fmt"

	applicationautoscalingv1 "github.com/berthhq/berth/gen/berth/applicationautoscaling/v1"
	cloudwatchv1 "github.com/berthhq/berth/gen/berth/cloudwatch/v1"
	ecrv1 "github.com/berthhq/berth/gen/berth/ecr/v1"
	ecsv1 "github.com/berthhq/berth/gen/berth/ecs/v1"
	elbv2v1 "github.com/berthhq/berth/gen/berth/elbv2/v1"
	eventsv1 "github.com/berthhq/berth/gen/berth/events/v1"
	logsv1 "github.com/berthhq/berth/gen/berth/logs/v1"
	secretsmanagerv1 "github.com/berthhq/berth/gen/berth/secretsmanager/v1"
	servicediscoveryv1 "github.com/berthhq/berth/gen/berth/servicediscovery/v1"
	ssmv1 "github.com/berthhq/berth/gen/berth/ssm/v1"
	stsv1 "github.com/berthhq/berth/gen/berth/sts/v1"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// Protocol is the wire protocol of an AWS service.
type Protocol int

const (
	// JSON is AWS JSON 1.1: POST / with X-Amz-Target {prefix}.{Action} and a JSON body;
	// errors are {"__type", "message"} JSON.
	JSON Protocol = iota
	// Query is the AWS query protocol: form-encoded Action=…&Version=… in (POST body or
	// GET query string), XML out; errors are <ErrorResponse> XML.
	Query
	// RPCv2CBOR is Smithy RPC v2 CBOR (package rpcv2cbor): POST
	// /service/{CBORService}/operation/{Action}, CBOR in and out, errors {"__type",
	// "message"} in CBOR. A service of this protocol also accepts the other protocols its
	// model lists, told apart per request: AWS JSON 1.0 (X-Amz-Target
	// {TargetPrefix}{Action}) and query (Action=…, XML out), as CloudWatch's model lists
	// smithy-rpc-v2-cbor, json and query.
	RPCv2CBOR
)

// Service describes one AWS service the gateway serves: how a request for it is
// recognised and which generated Connect service of the scheduler answers it. Adding a
// service is one entry in Services plus its handler on the scheduler (see
// docs/aws-services.md).
type Service struct {
	// SigningName is the service of the SigV4 credential scope, e.g. "secretsmanager":
	// requests are routed by it.
	SigningName string
	// Protocol is the service's wire protocol.
	Protocol Protocol
	// TargetPrefix is the X-Amz-Target prefix of its actions, with its dot (JSON only).
	TargetPrefix string
	// XMLNamespace is the xmlns of its responses and errors (Query only).
	XMLNamespace string
	// Version is the API version query requests name in Version (Query only).
	Version string
	// Descriptor is the generated Connect service (one RPC per action of the model).
	Descriptor protoreflect.ServiceDescriptor
	// CBORService is the service name in RPC v2 CBOR request paths (RPCv2CBOR only).
	CBORService string
	// ErrorShapes maps a query error code of a query-compatible service (the codes the
	// scheduler's errors carry, e.g. InvalidParameterValue) to the model's error shape
	// name (InvalidParameterValueException), which CBOR and JSON errors carry in __type
	// beside the x-amzn-query-error header (RPCv2CBOR only; a code not listed is its own
	// shape name).
	ErrorShapes map[string]string
	// Unsupported is the error code answered for an action of the model the scheduler
	// does not implement.
	Unsupported string
	// Throttling is the error code of a throttled request.
	Throttling string
	// MaxBodyBytes, when larger than Config.MaxBodyBytes, is this service's request body
	// limit (ECR's UploadLayerPart carries up to 20 MiB of layer, base64 in JSON); the
	// signature's credential scope names the service before the body is read.
	MaxBodyBytes int64
}

// Services are the AWS services the gateway serves, one entry each.
var Services = []Service{
	{
		SigningName:  "ecs",
		Protocol:     JSON,
		TargetPrefix: TargetPrefix,
		Descriptor:   ecsv1.File_berth_ecs_v1_ecs_service_proto.Services().ByName("EcsService"),
		Unsupported:  "UnsupportedFeatureException",
		Throttling:   "ThrottlingException",
	},
	{
		SigningName:  "secretsmanager",
		Protocol:     JSON,
		TargetPrefix: "secretsmanager.",
		Descriptor:   secretsmanagerv1.File_berth_secretsmanager_v1_secretsmanager_service_proto.Services().ByName("SecretsManagerService"),
		Unsupported:  "UnsupportedOperationException",
		Throttling:   "ThrottlingException",
	},
	{
		SigningName:  "ssm",
		Protocol:     JSON,
		TargetPrefix: "AmazonSSM.",
		Descriptor:   ssmv1.File_berth_ssm_v1_ssm_service_proto.Services().ByName("SsmService"),
		Unsupported:  "UnsupportedOperationException",
		Throttling:   "ThrottlingException",
	},
	{
		SigningName:  "sts",
		Protocol:     Query,
		XMLNamespace: "https://sts.amazonaws.com/doc/2011-06-15/",
		Version:      "2011-06-15",
		Descriptor:   stsv1.File_berth_sts_v1_sts_service_proto.Services().ByName("StsService"),
		Unsupported:  "UnsupportedOperation",
		Throttling:   "Throttling",
	},
	{
		SigningName:  "logs",
		Protocol:     JSON,
		TargetPrefix: "Logs_20140328.",
		Descriptor:   logsv1.File_berth_logs_v1_logs_service_proto.Services().ByName("LogsService"),
		Unsupported:  "UnsupportedOperationException",
		Throttling:   "ThrottlingException",
	},
	{
		SigningName:  "elasticloadbalancing",
		Protocol:     Query,
		XMLNamespace: "http://elasticloadbalancing.amazonaws.com/doc/2015-12-01/",
		Version:      "2015-12-01",
		Descriptor:   elbv2v1.File_berth_elbv2_v1_elbv2_service_proto.Services().ByName("Elbv2Service"),
		Unsupported:  "UnsupportedOperation",
		Throttling:   "Throttling",
	},
	{
		SigningName:  "servicediscovery",
		Protocol:     JSON,
		TargetPrefix: "Route53AutoNaming_v20170314.",
		Descriptor:   servicediscoveryv1.File_berth_servicediscovery_v1_servicediscovery_service_proto.Services().ByName("ServicediscoveryService"),
		Unsupported:  "UnsupportedOperationException",
		Throttling:   "RequestLimitExceeded",
	},
	{
		SigningName:  "ecr",
		Protocol:     JSON,
		TargetPrefix: "AmazonEC2ContainerRegistry_V20150921.",
		Descriptor:   ecrv1.File_berth_ecr_v1_ecr_service_proto.Services().ByName("EcrService"),
		Unsupported:  "UnsupportedOperationException",
		Throttling:   "ThrottlingException",
		// UploadLayerPart's layerPartBlob: at most 20 MiB, base64 in the JSON body.
		MaxBodyBytes: 28 << 20,
	},
	{
		SigningName:  "application-autoscaling",
		Protocol:     JSON,
		TargetPrefix: "AnyScaleFrontendService.",
		Descriptor:   applicationautoscalingv1.File_berth_applicationautoscaling_v1_applicationautoscaling_service_proto.Services().ByName("ApplicationAutoScalingService"),
		Unsupported:  "UnsupportedOperationException",
		Throttling:   "ThrottlingException",
	},
	{
		SigningName:  "events",
		Protocol:     JSON,
		TargetPrefix: "AWSEvents.",
		Descriptor:   eventsv1.File_berth_events_v1_events_service_proto.Services().ByName("EventsService"),
		Unsupported:  "UnsupportedOperationException",
		Throttling:   "ThrottlingException",
	},
	{
		SigningName:  "monitoring",
		Protocol:     RPCv2CBOR,
		CBORService:  "GraniteServiceVersion20100801",
		TargetPrefix: "GraniteServiceVersion20100801.",
		XMLNamespace: "http://monitoring.amazonaws.com/doc/2010-08-01/",
		Version:      "2010-08-01",
		Descriptor:   cloudwatchv1.File_berth_cloudwatch_v1_cloudwatch_service_proto.Services().ByName("CloudwatchService"),
		ErrorShapes: map[string]string{
			"InvalidParameterValue":       "InvalidParameterValueException",
			"InvalidParameterCombination": "InvalidParameterCombinationException",
			"MissingParameter":            "MissingRequiredParameterException",
			"LimitExceeded":               "LimitExceededFault",
			"InternalServiceError":        "InternalServiceFault",
			"InvalidFormat":               "InvalidFormatFault",
			"InvalidParameterInput":       "DashboardInvalidInputError",
		},
		Unsupported: "UnsupportedOperation",
		Throttling:  "Throttling",
	},
}

// service is a Service with its operations' Connect clients.
type service struct {
	Service
	ops map[string]*operation
}

func newServices(specs []Service, client connectHTTPClient, baseURL string) (map[string]*service, error) {
	out := make(map[string]*service, len(specs))
	for _, s := range specs {
		if s.Descriptor == nil {
			return nil, fmt.Errorf("gateway: service %s has no descriptor", s.SigningName)
		}
		if _, dup := out[s.SigningName]; dup {
			return nil, fmt.Errorf("gateway: service %s listed twice", s.SigningName)
		}
		ops, err := newOperations(s.Descriptor, client, baseURL)
		if err != nil {
			return nil, err
		}
		out[s.SigningName] = &service{Service: s, ops: ops}
	}
	return out, nil
}
