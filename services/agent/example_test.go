package agent_test

import (
	"context"
	"log/slog"
	"os"
	"os/signal"

	"github.com/berthhq/berth/services/agent"
)

// ExampleNew wires an agent to a control plane over h2c and runs it until
// interrupted. A SigV4-signing http.Client goes in Config.HTTPClient.
func ExampleNew() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	a, err := agent.New(agent.Config{
		ControlPlaneURL:    "http://127.0.0.1:4566",
		Cluster:            "default",
		DataDir:            "/var/lib/berth/agent",
		ContainerdAddress:  "/run/containerd/containerd.sock",
		InsecureRegistries: []string{"registry.internal:5000"},
		LogAddr:            "127.0.0.1:51680",
		Logger:             slog.New(slog.NewTextHandler(os.Stderr, nil)),
	})
	if err != nil {
		slog.Error("agent", "err", err)
		return
	}
	if err := a.Run(ctx); err != nil {
		slog.Error("agent", "err", err)
	}
}
