package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/spf13/cobra"

	"github.com/berthhq/berth/cmd/berth/internal/cli"
	"github.com/berthhq/berth/pkg/demoimage"
)

func imageCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "image",
		Short: "Put images into a registry without Docker",
	}
	auth := &registryAuth{}
	cmd.AddCommand(imagePushCommand(auth), imageDemoCommand(auth))
	cmd.PersistentFlags().StringVar(&auth.username, "username", "", "registry user name (with --password-stdin), e.g. AWS for Berth's ECR registry")
	cmd.PersistentFlags().BoolVar(&auth.passwordStdin, "password-stdin", false,
		"read the registry password from stdin: `aws ecr get-login-password | berth image push --username AWS --password-stdin …`")
	return cmd
}

// registryAuth is what --username and --password-stdin give; without them pushes sign in
// with the credentials `docker login` stored (~/.docker/config.json, credential helpers),
// or none.
type registryAuth struct {
	username      string
	passwordStdin bool
}

// option returns how push signs in to the registry.
func (a *registryAuth) option(cmd *cobra.Command) (remote.Option, error) {
	if !a.passwordStdin {
		if a.username != "" {
			return nil, fmt.Errorf("--username needs --password-stdin")
		}
		return remote.WithAuthFromKeychain(authn.DefaultKeychain), nil
	}
	if a.username == "" {
		return nil, fmt.Errorf("--password-stdin needs --username")
	}
	b, err := io.ReadAll(io.LimitReader(cmd.InOrStdin(), 1<<20))
	if err != nil {
		return nil, fmt.Errorf("read the password from stdin: %w", err)
	}
	pw := strings.TrimRight(string(b), "\r\n")
	if pw == "" {
		return nil, fmt.Errorf("--password-stdin: stdin holds no password")
	}
	return remote.WithAuth(&authn.Basic{Username: a.username, Password: pw}), nil
}

// imagePushCommand pushes an image from a `docker save` tarball or an OCI image layout.
func imagePushCommand(auth *registryAuth) *cobra.Command {
	return &cobra.Command{
		Use:   "push SOURCE REFERENCE",
		Short: "Push an image tarball (docker save) or OCI layout directory to REFERENCE",
		Example: "  berth image push ./app.tar 127.0.0.1:5000/app:1\n" +
			"  berth image push ./oci-layout 127.0.0.1:5000/app:1\n" +
			"  aws ecr get-login-password | berth image push --username AWS --password-stdin ./app.tar 127.0.0.1:5001/app:1",
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			img, err := loadImage(args[0])
			if err != nil {
				return err
			}
			return push(cmd, img, args[1], auth)
		},
	}
}

// imageDemoCommand packs bin/berth-testimage (built by `make build`) and pushes it.
func imageDemoCommand(auth *registryAuth) *cobra.Command {
	var binary string
	cmd := &cobra.Command{
		Use:   "demo [REFERENCE]",
		Short: "Push Berth's demo image (sleep, exit N, env, echo, serve PORT, check URL) to the dev registry",
		Long: "Packs the berth-testimage program that `make build` puts beside bin/berth into a\n" +
			"one-layer OCI image and pushes it. The image's entrypoint takes a mode: sleep N,\n" +
			"exit N, env, echo OUT ERR, serve PORT, ignore-sigterm, alloc MiB, check URL.",
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ref := cli.Env("BERTH_REGISTRY_ADDR", "127.0.0.1:5000") + "/berth/demo:latest"
			if len(args) == 1 {
				ref = args[0]
			}
			if binary == "" {
				self, err := os.Executable()
				if err != nil {
					return err
				}
				binary = filepath.Join(filepath.Dir(self), "berth-testimage")
			}
			bin, err := os.ReadFile(binary)
			if err != nil {
				return fmt.Errorf("read the demo program (run `make build` first): %w", err)
			}
			if err := demoimage.CheckStatic(bin); err != nil {
				return fmt.Errorf("%s: %w", binary, err)
			}
			img, err := demoimage.Pack(bin, runtime.GOARCH)
			if err != nil {
				return err
			}
			return push(cmd, img, ref, auth)
		},
	}
	cmd.Flags().StringVar(&binary, "binary", "", "path of berth-testimage (default: beside the berth binary)")
	return cmd
}

func loadImage(src string) (v1.Image, error) {
	st, err := os.Stat(src)
	if err != nil {
		return nil, err
	}
	if !st.IsDir() {
		img, err := tarball.ImageFromPath(src, nil)
		if err != nil {
			return nil, fmt.Errorf("read image tarball %s: %w", src, err)
		}
		return img, nil
	}
	idx, err := layout.ImageIndexFromPath(src)
	if err != nil {
		return nil, fmt.Errorf("read OCI layout %s: %w", src, err)
	}
	m, err := idx.IndexManifest()
	if err != nil {
		return nil, err
	}
	if len(m.Manifests) == 0 {
		return nil, fmt.Errorf("OCI layout %s holds no image", src)
	}
	return idx.Image(m.Manifests[0].Digest)
}

func push(cmd *cobra.Command, img v1.Image, ref string, a *registryAuth) error {
	// go-containerregistry already speaks plain HTTP to loopback and private-network
	// registries; BERTH_INSECURE_REGISTRIES names any others.
	var opts []name.Option
	if probe, err := name.ParseReference(ref); err == nil && slices.Contains(strings.Split(cli.Env("BERTH_INSECURE_REGISTRIES", ""), ","), probe.Context().RegistryStr()) {
		opts = append(opts, name.Insecure)
	}
	r, err := name.ParseReference(ref, opts...)
	if err != nil {
		return fmt.Errorf("image reference %q: %w", ref, err)
	}
	auth, err := a.option(cmd)
	if err != nil {
		return err
	}
	if err := remote.Write(r, img, remote.WithContext(cmd.Context()), auth); err != nil {
		return fmt.Errorf("push %s: %w", ref, err)
	}
	d, err := img.Digest()
	if err != nil {
		return err
	}
	fmt.Fprintf(cmd.OutOrStdout(), "pushed %s@%s\n", r.Context().Name(), d)
	return nil
}
