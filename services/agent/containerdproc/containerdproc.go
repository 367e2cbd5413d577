// Package containerdproc runs a private containerd daemon: its own root, state, config
// and socket under one directory, started, probed until it serves, restarted and
// stopped by this package. `berth dev` runs its host's containerd this way when no
// BERTH_CONTAINERD_ADDRESS is given; testkit/containerdtest wraps it for tests.
package containerdproc

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	runc "github.com/containerd/containerd/api/types/runc/options"
	containerd "github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/plugins"
	"github.com/pelletier/go-toml/v2"
)

// Snapshotter names this package chooses between.
const (
	SnapshotterOverlayfs = "overlayfs"
	SnapshotterNative    = "native"
)

const (
	// maxSocketPath leaves room under the 108-byte sun_path limit for
	// the ".ttrpc" suffix of the ttrpc socket and the terminating NUL.
	maxSocketPath = 100

	defaultStartTimeout = 30 * time.Second
	stopGrace           = 10 * time.Second
	logTailBytes        = 8 << 10
)

// disabledPlugins are containerd 1.6 plugins a private daemon does not need;
// disabling them keeps startup fast and quiet. Unknown IDs are ignored by
// containerd, so the list may name plugins of other versions too. The
// legacy io.containerd.runtime.v1.linux must stay: 1.6's tasks service
// refuses to load without it.
var disabledPlugins = []string{
	"io.containerd.grpc.v1.cri",
	"io.containerd.internal.v1.opt", // would create /opt/containerd
	"io.containerd.internal.v1.tracing",
	"io.containerd.tracing.processor.v1.otlp",
	"io.containerd.snapshotter.v1.aufs",
	"io.containerd.snapshotter.v1.btrfs",
	"io.containerd.snapshotter.v1.devmapper",
	"io.containerd.snapshotter.v1.zfs",
	"io.containerd.snapshotter.v1.blockfile",
	"io.containerd.nri.v1.nri",
}

// ErrUnavailable is wrapped by the errors of StartProcess and New when this host
// cannot run a private containerd: not root, or a binary it needs is not in
// PATH. The message says which and how to install it.
var ErrUnavailable = errors.New("cannot run containerd on this host")

// requiredBinaries are the programs a daemon needs to run containers, with
// the Debian package that provides each.
var requiredBinaries = []struct{ name, pkg string }{
	{"containerd", "containerd"},
	{"containerd-shim-runc-v2", "containerd"},
	{"runc", "runc"},
}

// checkHost returns the path of the containerd binary (containerdBin, or
// "containerd" in PATH when empty), or an error wrapping ErrUnavailable
// when not running as root or a required binary is missing.
func checkHost(containerdBin string) (string, error) {
	if uid := os.Geteuid(); uid != 0 {
		return "", fmt.Errorf("%w: containerd needs root; running as uid %d", ErrUnavailable, uid)
	}
	var path string
	for _, b := range requiredBinaries {
		name := b.name
		if name == "containerd" && containerdBin != "" {
			name = containerdBin
		}
		p, err := exec.LookPath(name)
		if err != nil {
			return "", fmt.Errorf("%w: %s binary not found in PATH: install %s (apt-get install %s)",
				ErrUnavailable, name, b.pkg, b.pkg)
		}
		if b.name == "containerd" {
			path = p
		}
	}
	return path, nil
}

// Option configures an Instance.
type Option func(*options)

type options struct {
	binary       string
	logLevel     string
	startTimeout time.Duration
}

// WithBinary runs the containerd binary at path instead of the one found
// in PATH.
func WithBinary(path string) Option {
	return func(o *options) { o.binary = path }
}

// WithLogLevel sets containerd's log level ("debug", "info", "warn",
// "error"); the default is "info". The log goes to Instance.LogPath.
func WithLogLevel(level string) Option {
	return func(o *options) { o.logLevel = level }
}

// WithStartTimeout bounds how long a start waits for the daemon to serve;
// the default is 30s.
func WithStartTimeout(d time.Duration) Option {
	return func(o *options) { o.startTimeout = d }
}

// Instance is one private containerd daemon and the directories it owns.
// Its methods are safe for concurrent use.
type Instance struct {
	opts       options
	dir        string
	address    string
	configPath string
	logPath    string

	mu          sync.Mutex
	cmd         *exec.Cmd
	exited      chan struct{} // closed when cmd has been waited for
	snapshotter string
}

// StartProcess starts containerd with its root, state, config and log under
// dir (created if missing) and returns once the daemon answers a Version
// call. The socket is dir/containerd.sock, or, when that path is too long
// for a unix socket, a directory under /tmp named after dir, so the address
// is the same for every start on the same dir. ctx bounds the start only: the
// daemon keeps running until Stop. It needs root and the containerd,
// containerd-shim-runc-v2 and runc binaries; without them the error wraps
// ErrUnavailable. If the daemon does not come up, the error quotes the end
// of its log.
func StartProcess(ctx context.Context, dir string, opts ...Option) (*Instance, error) {
	inst, err := New(dir, opts...)
	if err != nil {
		return nil, err
	}
	if err := inst.Start(ctx); err != nil {
		return nil, err
	}
	return inst, nil
}

// New prepares a daemon under dir (created if missing) without starting it: it checks
// the host (root, the containerd, containerd-shim-runc-v2 and runc binaries; the error
// wraps ErrUnavailable otherwise), picks the socket address and writes the config.
// Start runs it.
func New(dir string, opts ...Option) (*Instance, error) {
	o := options{logLevel: "info", startTimeout: defaultStartTimeout}
	for _, opt := range opts {
		opt(&o)
	}
	bin, err := checkHost(o.binary)
	if err != nil {
		return nil, err
	}
	o.binary = bin

	dir, err = filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("containerd dir: %w", err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create containerd dir: %w", err)
	}
	address, err := socketPath(dir)
	if err != nil {
		return nil, err
	}
	inst := &Instance{
		opts:       o,
		dir:        dir,
		address:    address,
		configPath: filepath.Join(dir, "config.toml"),
		logPath:    filepath.Join(dir, "containerd.log"),
	}
	if err := inst.writeConfig(); err != nil {
		return nil, err
	}
	return inst, nil
}

// socketPath returns dir/containerd.sock when it fits in a unix socket
// address, else a socket in a directory under /tmp whose name is derived from
// dir, created with mode 0700.
func socketPath(dir string) (string, error) {
	if p := filepath.Join(dir, "containerd.sock"); len(p) <= maxSocketPath {
		return p, nil
	}
	sum := sha256.Sum256([]byte(dir))
	sockDir := filepath.Join(os.TempDir(), "bt-"+hex.EncodeToString(sum[:6]))
	if err := os.Mkdir(sockDir, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return "", fmt.Errorf("create socket dir: %w", err)
	}
	fi, err := os.Lstat(sockDir)
	if err != nil {
		return "", fmt.Errorf("socket dir: %w", err)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !fi.IsDir() || !ok || int(st.Uid) != os.Geteuid() {
		return "", fmt.Errorf("socket dir %s is not a directory owned by uid %d", sockDir, os.Geteuid())
	}
	return filepath.Join(sockDir, "containerd.sock"), nil
}

func (i *Instance) writeConfig() error {
	cfg := map[string]any{
		"version":          2,
		"root":             filepath.Join(i.dir, "root"),
		"state":            filepath.Join(i.dir, "state"),
		"disabled_plugins": disabledPlugins,
		"grpc":             map[string]any{"address": i.address},
		"ttrpc":            map[string]any{"address": i.address + ".ttrpc"},
		"debug":            map[string]any{"level": i.opts.logLevel},
	}
	b, err := toml.Marshal(cfg)
	if err != nil {
		return fmt.Errorf("encode containerd config: %w", err)
	}
	if err := os.WriteFile(i.configPath, b, 0o600); err != nil {
		return fmt.Errorf("write containerd config: %w", err)
	}
	return nil
}

// Address returns the path of the daemon's gRPC unix socket, for
// containerd.New.
func (i *Instance) Address() string { return i.address }

// Dir returns the directory that holds the daemon's root, state, config
// and log.
func (i *Instance) Dir() string { return i.dir }

// RuncRoot returns the runc state directory of this daemon's containers, dir/runc. runc's
// default (/run/containerd/runc/<namespace>) is shared by every containerd of the host, so
// a container id a killed run left there breaks the next run's create ("container with
// given ID already exists"); clients give each container this root with RuntimeOpt.
func (i *Instance) RuncRoot() string { return filepath.Join(i.dir, "runc") }

// RuntimeOpt returns the container option that runs a container with runc (the
// io.containerd.runc.v2 shim) under RuncRoot: containerd 1.6 and 2.x take the runc root
// only from the container's runtime options, not from the daemon's config (its
// runtimes.runc.options belong to the CRI plugin).
func (i *Instance) RuntimeOpt() containerd.NewContainerOpts {
	return containerd.WithRuntime(plugins.RuntimeRuncV2, &runc.Options{Root: i.RuncRoot()})
}

// LogPath returns the file the daemon's output is appended to.
func (i *Instance) LogPath() string { return i.logPath }

// Snapshotter returns the snapshotter clients should use: "overlayfs" when
// the daemon could load it on this host, else "native". It is set by the
// first successful start.
func (i *Instance) Snapshotter() string {
	i.mu.Lock()
	defer i.mu.Unlock()
	return i.snapshotter
}

// Running reports whether the daemon process is running.
func (i *Instance) Running() bool {
	i.mu.Lock()
	defer i.mu.Unlock()
	return i.runningLocked()
}

func (i *Instance) runningLocked() bool {
	if i.cmd == nil {
		return false
	}
	select {
	case <-i.exited:
		return false
	default:
		return true
	}
}

// Start starts the daemon again on the same directories and address after
// Stop, and returns once it serves; it does nothing if the daemon is
// running. Containers and their tasks survive a stop and start: their shims
// keep running and the new daemon reconnects to them.
func (i *Instance) Start(ctx context.Context) error {
	i.mu.Lock()
	defer i.mu.Unlock()
	if i.runningLocked() {
		return nil
	}

	logf, err := os.OpenFile(i.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("open containerd log: %w", err)
	}
	cmd := exec.Command(i.opts.binary, "--config", i.configPath)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{
		// Own process group: a terminal's ^C goes to berth, which stops
		// the daemon in order.
		Setpgid: true,
		// Do not outlive the process that started it, e.g. a test
		// binary killed by its timeout.
		Pdeathsig: syscall.SIGTERM,
	}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("start containerd: %w", err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		logf.Close()
		close(exited)
	}()
	i.cmd, i.exited = cmd, exited

	if err := i.waitServing(ctx); err != nil {
		_ = i.stopLocked(context.WithoutCancel(ctx))
		return err
	}
	return nil
}

// waitServing polls the daemon with Version calls until it answers, the
// process exits, ctx is done or the start timeout passes. It then picks the
// snapshotter.
func (i *Instance) waitServing(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, i.opts.startTimeout)
	defer cancel()

	client, err := containerd.New(i.address, containerd.WithTimeout(time.Second))
	if err != nil {
		return fmt.Errorf("containerd client for %s: %w", i.address, err)
	}
	defer client.Close()

	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		callCtx, callCancel := context.WithTimeout(ctx, time.Second)
		_, err := client.Version(callCtx)
		callCancel()
		if err == nil {
			break
		}
		select {
		case <-i.exited:
			return fmt.Errorf("containerd exited while starting (%v); log %s ends:\n%s",
				i.cmd.ProcessState, i.logPath, i.LogTail())
		case <-ctx.Done():
			return fmt.Errorf("containerd at %s did not serve: %w (last error: %v); log %s ends:\n%s",
				i.address, ctx.Err(), err, i.logPath, i.LogTail())
		case <-tick.C:
		}
	}

	if err := checkServices(ctx, client); err != nil {
		return fmt.Errorf("%w; log %s ends:\n%s", err, i.logPath, i.LogTail())
	}
	if i.snapshotter == "" {
		snap, err := chooseSnapshotter(ctx, client)
		if err != nil {
			return err
		}
		i.snapshotter = snap
	}
	return nil
}

// checkServices returns an error naming each gRPC service plugin the daemon
// failed to load: a daemon without, say, its tasks service answers Version
// but cannot run containers.
func checkServices(ctx context.Context, client *containerd.Client) error {
	resp, err := client.IntrospectionService().Plugins(ctx, "type==io.containerd.grpc.v1")
	if err != nil {
		return fmt.Errorf("list containerd plugins: %w", err)
	}
	var errs []error
	for _, p := range resp.GetPlugins() {
		if ie := p.GetInitErr(); ie != nil {
			errs = append(errs, fmt.Errorf("containerd plugin %s.%s failed to load: %s", p.GetType(), p.GetID(), ie.GetMessage()))
		}
	}
	return errors.Join(errs...)
}

// chooseSnapshotter returns overlayfs if the daemon loaded it (it refuses to
// on backing filesystems without overlay support), else native.
func chooseSnapshotter(ctx context.Context, client *containerd.Client) (string, error) {
	resp, err := client.IntrospectionService().Plugins(ctx,
		"type==io.containerd.snapshotter.v1,id=="+SnapshotterOverlayfs)
	if err != nil {
		return "", fmt.Errorf("list containerd snapshotters: %w", err)
	}
	for _, p := range resp.GetPlugins() {
		if p.GetInitErr() == nil {
			return SnapshotterOverlayfs, nil
		}
	}
	return SnapshotterNative, nil
}

// Stop stops the daemon: SIGTERM, then SIGKILL if it has not exited within
// 10s or when ctx is done. It leaves the directories, and the shims of
// running tasks, in place so Start can bring it back. It returns an error
// only if the daemon had to be killed; stopping a stopped daemon does
// nothing.
func (i *Instance) Stop(ctx context.Context) error {
	i.mu.Lock()
	defer i.mu.Unlock()
	return i.stopLocked(ctx)
}

func (i *Instance) stopLocked(ctx context.Context) error {
	if !i.runningLocked() {
		return nil
	}
	_ = i.cmd.Process.Signal(syscall.SIGTERM)
	grace := time.NewTimer(stopGrace)
	defer grace.Stop()
	select {
	case <-i.exited:
		return nil
	case <-grace.C:
	case <-ctx.Done():
	}
	_ = i.cmd.Process.Kill()
	<-i.exited
	return fmt.Errorf("containerd (pid %d) did not stop within %s of SIGTERM; killed it", i.cmd.Process.Pid, stopGrace)
}

// Restart stops the daemon and starts it again on the same directories and
// address; see Stop and Start.
func (i *Instance) Restart(ctx context.Context) error {
	i.mu.Lock()
	err := i.stopLocked(ctx)
	i.mu.Unlock()
	if err != nil {
		return fmt.Errorf("restart containerd: %w", err)
	}
	return i.Start(ctx)
}

// LogTail returns the last 8 KiB of the daemon's log (less when the log is shorter; ""
// when it cannot be read), for error messages.
func (i *Instance) LogTail() string {
	f, err := os.Open(i.logPath)
	if err != nil {
		return fmt.Sprintf("(cannot read log: %v)", err)
	}
	defer f.Close()
	if fi, err := f.Stat(); err == nil && fi.Size() > logTailBytes {
		if _, err := f.Seek(-logTailBytes, io.SeekEnd); err != nil {
			return fmt.Sprintf("(cannot read log: %v)", err)
		}
	}
	b, err := io.ReadAll(f)
	if err != nil {
		return fmt.Sprintf("(cannot read log: %v)", err)
	}
	return string(bytes.TrimSpace(b))
}
