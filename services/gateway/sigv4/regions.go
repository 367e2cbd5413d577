package sigv4

// PublicRegions is the default allow-list of credential-scope regions: every region of
// the commercial AWS partition ("aws"), as the partition table of aws-sdk-go-v2 v1.48.0
// lists them (internal/endpoints/awsrulesfn/partitions.go, an internal package, hence
// this copy), without the pseudo-region "aws-global". China (aws-cn), GovCloud
// (aws-us-gov) and the ISO partitions are other partitions with another ARN prefix, so
// they are not in it. A region added to the partition later is one more row here, or
// the operator's own list (gateway Config.Regions, `--regions`).
var PublicRegions = []string{
	"us-east-1",
	"us-east-2",
	"us-west-1",
	"us-west-2",
	"af-south-1",
	"ap-east-1",
	"ap-east-2",
	"ap-northeast-1",
	"ap-northeast-2",
	"ap-northeast-3",
	"ap-south-1",
	"ap-south-2",
	"ap-southeast-1",
	"ap-southeast-2",
	"ap-southeast-3",
	"ap-southeast-4",
	"ap-southeast-5",
	"ap-southeast-6",
	"ap-southeast-7",
	"ca-central-1",
	"ca-west-1",
	"eu-central-1",
	"eu-central-2",
	"eu-north-1",
	"eu-south-1",
	"eu-south-2",
	"eu-west-1",
	"eu-west-2",
	"eu-west-3",
	"il-central-1",
	"me-central-1",
	"me-south-1",
	"me-west-1",
	"mx-central-1",
	"sa-east-1",
	"sa-west-1",
}
