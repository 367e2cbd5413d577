package control

import (
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	ecsv1 "github.com/berthhq/berth/gen/berth/ecs/v1"
)

func TestCheckLogConfiguration(t *testing.T) {
	aws := func(opts map[string]string) *ecsv1.LogConfiguration {
		return &ecsv1.LogConfiguration{LogDriver: proto.String("awslogs"), Options: opts}
	}
	for _, lc := range []*ecsv1.LogConfiguration{
		nil,
		{LogDriver: proto.String("json-file")},
		aws(map[string]string{"awslogs-group": "/ecs/web"}),
		aws(map[string]string{"awslogs-group": "/ecs/web", "awslogs-region": "eu-west-1", "awslogs-stream-prefix": "web",
			"awslogs-create-group": "true", "mode": "non-blocking", "max-buffer-size": "25m", "awslogs-multiline-pattern": `^\[`}),
		aws(map[string]string{"awslogs-group": "g", "mode": "blocking", "awslogs-datetime-format": "%Y-%m-%d"}),
		withSecrets(aws(nil), "awslogs-group", "arn:aws:secretsmanager:us-east-1:000000000000:secret:g-AbCdEf", "awslogs-stream-prefix", "/p"),
		withSecrets(aws(map[string]string{"awslogs-group": "g"}), "awslogs-multiline-pattern", "pattern"),
	} {
		if err := checkLogConfiguration(0, lc); err != nil {
			t.Errorf("%v refused: %v", lc, err)
		}
	}
	for _, tc := range []struct {
		lc   *ecsv1.LogConfiguration
		want string
	}{
		{&ecsv1.LogConfiguration{LogDriver: proto.String("json-file"), Options: map[string]string{"max-size": "1m"}}, `containerDefinitions[0].logConfiguration.options is not supported for logDriver "json-file"`},
		{aws(nil), "awslogs-group must be a log group name"},
		{aws(map[string]string{"awslogs-group": "bad group"}), "awslogs-group must be a log group name"},
		{aws(map[string]string{"awslogs-group": "g", "awslogs-endpoint": "http://x"}), "unknown log opt 'awslogs-endpoint'"},
		{aws(map[string]string{"awslogs-group": "g", "awslogs-region": "mars"}), "awslogs-region \"mars\""},
		{aws(map[string]string{"awslogs-group": "g", "awslogs-stream-prefix": "a:b"}), "awslogs-stream-prefix"},
		{aws(map[string]string{"awslogs-group": "g", "awslogs-create-group": "yes"}), "awslogs-create-group must be true or false"},
		{aws(map[string]string{"awslogs-group": "g", "mode": "fast"}), "mode must be blocking or non-blocking"},
		{aws(map[string]string{"awslogs-group": "g", "mode": "blocking", "max-buffer-size": "1m"}), "only supported with mode non-blocking"},
		{aws(map[string]string{"awslogs-group": "g", "max-buffer-size": "lots"}), "max-buffer-size \"lots\""},
		{aws(map[string]string{"awslogs-group": "g", "awslogs-multiline-pattern": "("}), "not a regular expression"},
		{aws(map[string]string{"awslogs-group": "g", "awslogs-multiline-pattern": "^x", "awslogs-datetime-format": "%Y"}), "at the same time"},
		{withSecrets(aws(map[string]string{"awslogs-group": "g"}), "awslogs-endpoint", "p"), "secretOptions[0]: unknown log opt 'awslogs-endpoint'"},
		{withSecrets(aws(map[string]string{"awslogs-group": "g"}), "", "p"), "secretOptions[0].name must not be empty"},
		{withSecrets(aws(map[string]string{"awslogs-group": "g"}), "mode", ""), "secretOptions[0].valueFrom must not be empty"},
		{withSecrets(aws(map[string]string{"awslogs-group": "g"}), "awslogs-group", "p"), "given in both options and secretOptions"},
		{withSecrets(aws(map[string]string{"awslogs-group": "g"}), "mode", "p", "mode", "q"), "secretOptions[1]: log opt 'mode' is given twice"},
		{withSecrets(&ecsv1.LogConfiguration{LogDriver: proto.String("json-file")}, "max-size", "p"), `secretOptions[0] is not supported for logDriver "json-file"`},
		{withSecrets(aws(nil), "mode", "p"), "awslogs-group must be a log group name"},
	} {
		err := checkLogConfiguration(0, tc.lc)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "ClientException") {
			t.Errorf("%v: err = %v, want ClientException containing %q", tc.lc.GetOptions(), err, tc.want)
		}
	}
}

// withSecrets adds secretOptions name, valueFrom pairs to lc.
func withSecrets(lc *ecsv1.LogConfiguration, kv ...string) *ecsv1.LogConfiguration {
	for i := 0; i+1 < len(kv); i += 2 {
		lc.SecretOptions = append(lc.SecretOptions, &ecsv1.Secret{Name: proto.String(kv[i]), ValueFrom: proto.String(kv[i+1])})
	}
	return lc
}
