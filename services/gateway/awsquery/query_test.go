package awsquery_test

import (
	"errors"
	"net/url"
	"strings"
	"testing"

	elbv2v1 "github.com/berthhq/berth/gen/berth/elbv2/v1"
	stsv1 "github.com/berthhq/berth/gen/berth/sts/v1"
	"github.com/berthhq/berth/services/gateway/awsquery"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
)

func TestUnmarshal(t *testing.T) {
	form, _ := url.ParseQuery("Action=AssumeRole&Version=2011-06-15&RoleArn=arn%3Aaws%3Aiam%3A%3A1%3Arole%2Fr&RoleSessionName=s" +
		"&DurationSeconds=900&Tags.member.1.Key=k1&Tags.member.1.Value=v1&Tags.member.2.Key=k2&Tags.member.2.Value=v2" +
		"&PolicyArns.member.1.arn=arn%3Ap&TransitiveTagKeys.member.1=k1")
	var in stsv1.AssumeRoleRequest
	if err := awsquery.Unmarshal(form, &in); err != nil {
		t.Fatal(err)
	}
	if in.GetRoleArn() != "arn:aws:iam::1:role/r" || in.GetDurationSeconds() != 900 || len(in.GetTags()) != 2 ||
		in.GetTags()[1].GetValue() != "v2" || in.GetPolicyArns()[0].GetArn() != "arn:p" || in.GetTransitiveTagKeys()[0] != "k1" {
		t.Errorf("decoded %v", &in)
	}
	for body, want := range map[string]string{
		"RoleArn=a&RoleSessionName=s&DurationSeconds=ten": "could not be converted to an Integer",
		"RoleArn=a&RoleSessionName=s&Nope=1":              "Unknown parameter 'Nope'",
		"RoleSessionName=s":                               "Value null at 'roleArn'",
	} {
		form, _ := url.ParseQuery(body)
		err := awsquery.Unmarshal(form, &stsv1.AssumeRoleRequest{})
		var qe *awsquery.Error
		if !errors.As(err, &qe) || qe.Code != awsquery.ValidationError || !strings.Contains(qe.Message, want) {
			t.Errorf("%s: %v, want ValidationError containing %q", body, err, want)
		}
	}
}

func TestMarshal(t *testing.T) {
	acct, arn := "000000000000", "arn:aws:iam::000000000000:root"
	exp := 1700000000.5
	b := string(awsquery.Marshal("AssumeRole", &stsv1.AssumeRoleResponse{
		Credentials:     &stsv1.Credentials{AccessKeyId: &acct, Expiration: &exp},
		AssumedRoleUser: &stsv1.AssumedRoleUser{Arn: &arn},
	}, "https://sts.amazonaws.com/doc/2011-06-15/", "req-1"))
	for _, want := range []string{
		`<AssumeRoleResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/">`,
		"<AssumeRoleResult><AssumedRoleUser><Arn>arn:aws:iam::000000000000:root</Arn></AssumedRoleUser>",
		"<Expiration>2023-11-14T22:13:20.500Z</Expiration>",
		"<RequestId>req-1</RequestId>",
	} {
		if !strings.Contains(b, want) {
			t.Errorf("response lacks %s:\n%s", want, b)
		}
	}
	if strings.Contains(b, "PackedPolicySize") {
		t.Errorf("unset member written:\n%s", b)
	}
	e := string(awsquery.MarshalError(500, "InternalFailure", "a <b> & 'c'", "ns", "r"))
	if !strings.Contains(e, "<Type>Receiver</Type>") || !strings.Contains(e, "<Message>a &lt;b&gt; &amp; 'c'</Message>") {
		t.Errorf("error:\n%s", e)
	}
}

// TestMarshalEmptyLists: AWS writes an empty list of a result as an empty element
// (<TargetGroups/>), and so the nested members of EmptyLists (a resource's <Tags/> in
// DescribeTags, a group's <LoadBalancerArns/>, the default rule's <Conditions/>); other
// empty nested lists stay out. Every row of EmptyLists names a list member of the
// generated model shapes.
func TestMarshalEmptyLists(t *testing.T) {
	for _, e := range awsquery.EmptyLists {
		d, err := protoregistry.GlobalFiles.FindDescriptorByName(e.Shape)
		md, ok := d.(protoreflect.MessageDescriptor)
		if err != nil || !ok {
			t.Errorf("EmptyLists row %s.%s: no such shape (%v)", e.Shape, e.Member, err)
			continue
		}
		fd := md.Fields().ByJSONName(e.Member)
		if fd == nil || !fd.IsList() {
			t.Errorf("EmptyLists row %s.%s: not a list member of the shape", e.Shape, e.Member)
		}
	}
	arn := "arn:aws:elasticloadbalancing:us-east-1:1:loadbalancer/app/web/1"
	for _, tc := range []struct {
		action string
		m      proto.Message
		want   []string
		not    []string
	}{
		{"DescribeTargetGroups", &elbv2v1.DescribeTargetGroupsResponse{}, []string{"<DescribeTargetGroupsResult><TargetGroups/></DescribeTargetGroupsResult>"}, nil},
		{"DescribeTags", &elbv2v1.DescribeTagsResponse{TagDescriptions: []*elbv2v1.TagDescription{{ResourceArn: &arn}}},
			[]string{"<TagDescriptions><member><ResourceArn>" + arn + "</ResourceArn><Tags/></member></TagDescriptions>"}, nil},
		{"DescribeTargetGroups", &elbv2v1.DescribeTargetGroupsResponse{TargetGroups: []*elbv2v1.TargetGroup{{TargetGroupArn: &arn}}},
			[]string{"<LoadBalancerArns/>"}, nil},
		{"DescribeListeners", &elbv2v1.DescribeListenersResponse{Listeners: []*elbv2v1.Listener{{ListenerArn: &arn}}},
			[]string{"<Listeners><member><ListenerArn>"}, []string{"<Certificates", "<AlpnPolicy", "<DefaultActions"}},
		{"DescribeRules", &elbv2v1.DescribeRulesResponse{Rules: []*elbv2v1.Rule{{RuleArn: &arn}}}, []string{"<Conditions/>"}, []string{"<Actions"}},
		{"DescribeTargetHealth", &elbv2v1.DescribeTargetHealthResponse{}, []string{"<TargetHealthDescriptions/>"}, nil},
	} {
		b := string(awsquery.Marshal(tc.action, tc.m, "ns", "r"))
		for _, w := range tc.want {
			if !strings.Contains(b, w) {
				t.Errorf("%s lacks %s:\n%s", tc.action, w, b)
			}
		}
		for _, n := range tc.not {
			if strings.Contains(b, n) {
				t.Errorf("%s writes %s:\n%s", tc.action, n, b)
			}
		}
	}
}
