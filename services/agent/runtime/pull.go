package runtime

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strings"
	"time"

	containerd "github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/core/remotes"
	"github.com/containerd/containerd/v2/core/remotes/docker"
	"github.com/containerd/errdefs"
	"github.com/distribution/reference"
)

// Pull behaviours, as the ECS agent's ECS_IMAGE_PULL_BEHAVIOR offers them.
const (
	// PullDefault pulls every time and falls back to a cached image when
	// the pull fails.
	PullDefault = "default"
	// PullAlways pulls every time; a failed pull fails the task.
	PullAlways = "always"
	// PullOnce pulls only if the image is not on the host yet.
	PullOnce = "once"
	// PullPreferCached uses a cached image if there is one, else pulls.
	PullPreferCached = "prefer-cached"
)

// Credential is a registry user name and password (or token).
type Credential struct {
	// Username is the registry user.
	Username string
	// Password is the user's password or an access token.
	Password string
}

// PullConfig says how images are pulled.
type PullConfig struct {
	// Behavior is one of PullDefault (the default), PullAlways, PullOnce,
	// PullPreferCached.
	Behavior string
	// Snapshotter unpacks pulled images; default "overlayfs".
	Snapshotter string
	// InsecureRegistries are hosts ("host:port") spoken to over plain HTTP;
	// loopback hosts always are.
	InsecureRegistries []string
	// Credentials maps a registry host to its credentials; pulls from
	// other hosts are anonymous. Docker Hub's may be filed under any of its
	// names (docker.io, registry-1.docker.io, index.docker.io).
	Credentials map[string]Credential
	// RootCAs verifies HTTPS registries; nil: the system roots. The agent passes the
	// system roots plus its --tls-ca, so a Berth ECR registry serving a certificate of
	// the deployment's own CA (berth tls) is trusted as the gateway is.
	RootCAs *x509.CertPool
	// Timeout bounds one pull attempt; default 5 min.
	Timeout time.Duration
	// Retries is how many more attempts follow a failed one; default 2.
	Retries int
	// RetryDelay is the first delay between attempts, doubled each time;
	// default 500 ms.
	RetryDelay time.Duration
}

func (c PullConfig) withDefaults() PullConfig {
	if c.Behavior == "" {
		c.Behavior = PullDefault
	}
	if c.Snapshotter == "" {
		c.Snapshotter = "overlayfs"
	}
	if c.Timeout <= 0 {
		c.Timeout = 5 * time.Minute
	}
	if c.Retries < 0 {
		c.Retries = 0
	}
	if c.RetryDelay <= 0 {
		c.RetryDelay = 500 * time.Millisecond
	}
	return c
}

// NormalizeRef returns the full reference of an image name as Docker reads
// it: "nginx" is "docker.io/library/nginx:latest", a name without tag or
// digest gets ":latest". It returns an error for an invalid name.
func NormalizeRef(image string) (string, error) {
	named, err := reference.ParseDockerRef(image)
	if err != nil {
		return "", fmt.Errorf("invalid image reference %q: %w", image, err)
	}
	return named.String(), nil
}

// isPlainHTTP reports whether host is a loopback host or listed insecure.
func isPlainHTTP(host string, insecure []string) bool {
	if slices.Contains(insecure, host) {
		return true
	}
	h := host
	if hh, _, err := net.SplitHostPort(host); err == nil {
		h = hh
	}
	if h == "localhost" {
		return true
	}
	ip := net.ParseIP(strings.Trim(h, "[]"))
	return ip != nil && ip.IsLoopback()
}

// Pull makes the image ref (normalised) available unpacked for cfg's
// snapshotter, pulling it as cfg.Behavior says, with cfg.Retries retries
// and exponential backoff. It returns the image, whether it was pulled (not
// served from cache), and an error that names the reference.
func Pull(ctx context.Context, client *containerd.Client, ref string, cfg PullConfig) (containerd.Image, bool, error) {
	cfg = cfg.withDefaults()
	ref, err := NormalizeRef(ref)
	if err != nil {
		return nil, false, err
	}
	cached := func() containerd.Image {
		img, err := client.GetImage(ctx, ref)
		if err != nil {
			return nil
		}
		ok, err := img.IsUnpacked(ctx, cfg.Snapshotter)
		if err != nil {
			return nil
		}
		if !ok {
			if err := img.Unpack(ctx, cfg.Snapshotter); err != nil {
				return nil
			}
		}
		return img
	}
	if cfg.Behavior == PullOnce || cfg.Behavior == PullPreferCached {
		if img := cached(); img != nil {
			return img, false, nil
		}
	}
	img, err := pullWithRetry(ctx, client, ref, cfg)
	if err != nil {
		if cfg.Behavior == PullDefault {
			if img := cached(); img != nil {
				return img, false, nil
			}
		}
		return nil, false, err
	}
	return img, true, nil
}

// dockerHubHosts are the names of Docker Hub's registry: image references say
// "docker.io" (reference normalisation turns "index.docker.io" into it), while
// containerd's resolver contacts, and asks credentials for, "registry-1.docker.io"
// (docker.ConfigureDefaultRegistries). Docker's own config files file them under
// "https://index.docker.io/v1/".
var dockerHubHosts = []string{"docker.io", "registry-1.docker.io", "index.docker.io"}

// credential returns the credentials for the registry host the resolver contacts: those
// filed under host itself, else, for Docker Hub, those filed under any of its names.
func (c PullConfig) credential(host string) Credential {
	if cred, ok := c.Credentials[host]; ok {
		return cred
	}
	if slices.Contains(dockerHubHosts, host) {
		for _, h := range dockerHubHosts {
			if cred, ok := c.Credentials[h]; ok {
				return cred
			}
		}
	}
	return Credential{}
}

// registryClient returns the HTTP client of pulls: nil (http.DefaultClient, the system
// roots) without roots, else one verifying registries' certificates against roots.
func registryClient(roots *x509.CertPool) *http.Client {
	if roots == nil {
		return nil
	}
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.TLSClientConfig = &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: roots}
	return &http.Client{Transport: t}
}

// newResolver returns the resolver pulls use: Docker Hub and other registries as
// containerd names their hosts, plain HTTP for loopback and cfg.InsecureRegistries, and
// cfg's credentials presented to the host each request goes to. client carries the
// requests; nil is http.DefaultClient.
func newResolver(cfg PullConfig, client *http.Client) remotes.Resolver {
	authorizer := docker.NewDockerAuthorizer(
		docker.WithAuthClient(client),
		docker.WithAuthCreds(func(host string) (string, string, error) {
			c := cfg.credential(host)
			return c.Username, c.Password, nil
		}))
	return docker.NewResolver(docker.ResolverOptions{
		Hosts: docker.ConfigureDefaultRegistries(
			docker.WithPlainHTTP(func(host string) (bool, error) { return isPlainHTTP(host, cfg.InsecureRegistries), nil }),
			docker.WithAuthorizer(authorizer),
			docker.WithClient(client),
		),
	})
}

func pullWithRetry(ctx context.Context, client *containerd.Client, ref string, cfg PullConfig) (containerd.Image, error) {
	resolver := newResolver(cfg, registryClient(cfg.RootCAs))
	delay := cfg.RetryDelay
	var lastErr error
	for attempt := 0; attempt <= cfg.Retries; attempt++ {
		if attempt > 0 {
			select {
			case <-ctx.Done():
				return nil, fmt.Errorf("pull %s: %w (last error: %v)", ref, ctx.Err(), lastErr)
			case <-time.After(delay):
			}
			delay *= 2
		}
		actx, cancel := context.WithTimeout(ctx, cfg.Timeout)
		img, err := client.Pull(actx, ref,
			containerd.WithResolver(resolver),
			containerd.WithPullUnpack,
			containerd.WithPullSnapshotter(cfg.Snapshotter),
		)
		cancel()
		if err == nil {
			return img, nil
		}
		lastErr = err
		if ctx.Err() != nil || errors.Is(err, errdefs.ErrNotFound) {
			// A missing image does not appear by retrying.
			break
		}
	}
	return nil, fmt.Errorf("pull %s: %w", ref, lastErr)
}
