package ociregistry_test

import (
	"context"
	"log"

	"github.com/berthhq/berth/services/agent/ociregistry"
	"github.com/berthhq/berth/testkit/testimage"
)

// Serving the registry outside a test, as `berth dev` does, and pushing the
// test image to it.
func ExampleServe() {
	ctx := context.Background()
	reg, err := ociregistry.Serve(ctx, "127.0.0.1:5000")
	if err != nil {
		log.Fatal(err)
	}
	defer reg.Shutdown(ctx)

	img, err := testimage.Build(ctx)
	if err != nil {
		log.Fatal(err)
	}
	if err := testimage.Push(ctx, img, reg.Addr()+"/berth/testimage:latest"); err != nil {
		log.Fatal(err)
	}
}
