package gateway_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/berthhq/berth/services/gateway"
)

// FuzzGateway sends signed requests with arbitrary actions and bodies through the real
// gateway (and stub scheduler): whatever the client sends, the answer is AWS JSON with a
// 200, 400 or 413, never a panic, and a 500 only where the stub scheduler fails on purpose
// (DeleteCluster). The seed corpus is in testdata/fuzz/FuzzGateway.
func FuzzGateway(f *testing.F) {
	e := newEnv(f, func(c *gateway.Config) {
		c.Rate = -1
		c.LockoutAfter = -1
		c.MaxBodyBytes = 64 << 10
	})
	for _, seed := range []struct{ target, body string }{
		{"ListClusters", `{}`},
		{"ListClusters", `{"maxResults":10,"nextToken":"abc"}`},
		{"CreateCluster", `{"clusterName":"web","tags":[{"key":"k","value":"v"}]}`},
		{"RegisterTaskDefinition", `{"family":"f","containerDefinitions":[{"name":"a","image":"b","cpu":1,"memory":2,"dockerLabels":{"x":"y"}}]}`},
		{"SubmitTaskStateChange", `{"cluster":"c","task":"t","status":"RUNNING","pullStartedAt":1.5}`},
		{"DescribeTasks", `{"cluster":"c","tasks":["t"],"include":["TAGS"]}`},
		{"Nope", `{`},
	} {
		f.Add(seed.target, seed.body)
	}
	f.Fuzz(func(t *testing.T, target, body string) {
		req := httptest.NewRequest(http.MethodPost, "http://gateway.test/", strings.NewReader(body))
		req.RemoteAddr = "192.0.2.1:1234"
		req.Header.Set("Content-Type", "application/x-amz-json-1.1")
		req.Header.Set("X-Amz-Target", gateway.TargetPrefix+target)
		sum := sha256.Sum256([]byte(body))
		if err := v4.NewSigner().SignHTTP(context.Background(), aws.Credentials{AccessKeyID: devKey, SecretAccessKey: devSecret}, req, hex.EncodeToString(sum[:]), "ecs", region, time.Now()); err != nil {
			t.Skipf("fuzz input is not a signable HTTP request (not a gateway case): %v", err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		req = req.WithContext(ctx)
		w := httptest.NewRecorder()
		start := time.Now()
		e.gw.ServeHTTP(w, req)
		if d := time.Since(start); d > 5*time.Second {
			t.Fatalf("%q %q took %v: %d %s", target, body, d, w.Code, w.Body.Bytes())
		}
		res := w.Result()
		if res.Header.Get("X-Amzn-RequestId") == "" {
			t.Fatal("no request id")
		}
		var decoded map[string]any
		if err := json.Unmarshal(w.Body.Bytes(), &decoded); err != nil {
			t.Fatalf("%d answer is not JSON: %q", res.StatusCode, w.Body.Bytes())
		}
		switch res.StatusCode {
		case http.StatusOK:
			return
		case http.StatusBadRequest, http.StatusRequestEntityTooLarge:
		case http.StatusInternalServerError:
			if target != "DeleteCluster" || decoded["__type"] != "ServerException" {
				t.Fatalf("500 for %q %q: %s", target, body, w.Body.Bytes())
			}
		default:
			t.Fatalf("status %d for %q %q: %s", res.StatusCode, target, body, w.Body.Bytes())
		}
		if typ, _ := decoded["__type"].(string); typ == "" || res.Header.Get("X-Amzn-ErrorType") != typ {
			t.Fatalf("error without __type: %s", w.Body.Bytes())
		}
		if _, ok := decoded["message"].(string); !ok {
			t.Fatalf("error without message: %s", w.Body.Bytes())
		}
		if typ := decoded["__type"]; typ == "InvalidSignatureException" || typ == "IncompleteSignatureException" {
			t.Fatalf("a valid signature was refused: %s", w.Body.Bytes())
		}
	})
}
