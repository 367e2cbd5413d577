package gateway_test

import (
	"context"
	"log"
	"log/slog"
	"net/http"

	"github.com/berthhq/berth/services/gateway"
)

// The gateway in front of a scheduler on 127.0.0.1:7070, served with h2c so agents can
// hold their bidi session through it.
func ExampleNew() {
	gw, err := gateway.New(gateway.Config{
		SchedulerURL: "http://127.0.0.1:7070",
		Logger:       slog.Default(),
		Dev:          true,
		Health:       func(context.Context) (any, bool) { return map[string]string{"etcd": "ok"}, true },
	})
	if err != nil {
		log.Fatal(err)
	}
	var protocols http.Protocols
	protocols.SetHTTP1(true)
	protocols.SetUnencryptedHTTP2(true)
	srv := &http.Server{Addr: "127.0.0.1:4566", Handler: gw, Protocols: &protocols}
	_ = srv // srv.ListenAndServe()
}
