package awsjson_test

import (
	"bytes"
	"testing"

	smv1 "github.com/berthhq/berth/gen/berth/secretsmanager/v1"
	"github.com/berthhq/berth/services/gateway/awsjson"
)

// A map of lists (Secrets Manager's VersionIdsToStages) goes through its wrapper message
// as the bare list, and blobs are base64, both ways.
func TestWrapperAndBlob(t *testing.T) {
	out, err := awsjson.Marshal(&smv1.DescribeSecretResponse{
		VersionIdsToStages: map[string]*smv1.SecretVersionStagesType{"v1": {Values: []string{"AWSCURRENT", "x"}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(out, []byte(`"VersionIdsToStages":{"v1":["AWSCURRENT","x"]}`)) {
		t.Errorf("wrapper encoded as %s", out)
	}
	var in smv1.CreateSecretRequest
	if err := awsjson.Unmarshal([]byte(`{"Name":"n","SecretBinary":"AAEC/w=="}`), &in); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(in.GetSecretBinary(), []byte{0, 1, 2, 255}) {
		t.Errorf("blob decoded as %v", in.GetSecretBinary())
	}
	if err := awsjson.Unmarshal([]byte(`{"Name":"n","SecretBinary":"***"}`), &in); err == nil {
		t.Error("invalid base64 accepted")
	}
	res, _ := awsjson.Marshal(&smv1.GetSecretValueResponse{SecretBinary: []byte{0, 1, 2, 255}})
	if !bytes.Contains(res, []byte(`"SecretBinary":"AAEC/w=="`)) {
		t.Errorf("blob encoded as %s", res)
	}
	var lm smv1.ListSecretsResponse
	if err := awsjson.Unmarshal([]byte(`{"SecretList":[{"SecretVersionsToStages":{"v":["a"]}}]}`), &lm); err != nil {
		t.Fatal(err)
	}
	if got := lm.GetSecretList()[0].GetSecretVersionsToStages()["v"].GetValues(); len(got) != 1 || got[0] != "a" {
		t.Errorf("wrapper decoded as %v", got)
	}
}
