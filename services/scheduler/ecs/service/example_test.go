package service_test

import (
	"context"
	"log/slog"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berthhq/berth/services/scheduler/ecs/placement"
	"github.com/berthhq/berth/services/scheduler/ecs/service"
	"github.com/berthhq/berth/services/scheduler/platform/leader"
)

// The wiring of a scheduler replica: every replica serves the service actions through a
// Handler (embedded beside *control.Server in the ECS handler); the leader runs a
// Reconciler per term, fenced by the term and cancelled when leadership ends.
func Example() {
	var cli *clientv3.Client // the replica's etcd client
	log := slog.Default()
	placer := placement.NewPlacer(cli, log)
	kick := service.NewKicker()
	handler := service.NewHandler(service.Config{KV: cli, Logger: log, Kick: kick})
	_ = handler // mux.Handle(control.NewHandler(struct{*control.Server; *service.Handler}{...}))

	elector := leader.New(leader.Config{Client: cli, Identity: "replica-1"})
	_ = elector.Run(context.Background(), func(ctx context.Context, term leader.Term) {
		r := service.NewReconciler(service.ReconcilerConfig{
			Client: cli, Placer: placer, Logger: log,
			Fence: []clientv3.Cmp{term.Fence()}, Kick: kick,
		})
		_ = r.Run(ctx) // returns when leadership ends
	})
}
