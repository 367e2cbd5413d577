// Package cli holds what every Berth binary's command line shares: environment defaults,
// the JSON logger, the credentials-file reader, the h2c server loop, OpenTelemetry trace
// export (off unless OTEL_EXPORTER_OTLP_ENDPOINT is set) and main's exit path.
// It imports no service package, so a per-role binary (berth-agent, berth-gateway) links
// only the service it runs.
package cli

import (
	"bufio"
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
)

// SplitList returns the non-empty, space-trimmed items of a comma-separated list
// ("a, b,,c" → [a b c]); nil for none.
func SplitList(v string) []string {
	var out []string
	for _, r := range strings.Split(v, ",") {
		if r = strings.TrimSpace(r); r != "" {
			out = append(out, r)
		}
	}
	return out
}

// Env returns the environment variable name's value, or def when it is unset (an empty
// value that is set is returned as is).
func Env(name, def string) string {
	if v, ok := os.LookupEnv(name); ok {
		return v
	}
	return def
}

// JSONLogger returns the services' logger: slog JSON on the command's stderr.
func JSONLogger(cmd *cobra.Command) *slog.Logger {
	return slog.New(slog.NewJSONHandler(cmd.ErrOrStderr(), nil))
}

// ReadEnvFile reads path's KEY=VALUE lines into a map (an optional leading "export " and
// surrounding quotes are dropped); blank lines and # comments are skipped. It returns an
// error naming the file and the line that is not KEY=VALUE, or the file's read error.
func ReadEnvFile(path string) (map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	vals := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			return nil, fmt.Errorf("%s: line %q is not KEY=VALUE", path, line)
		}
		vals[strings.TrimSpace(strings.TrimPrefix(k, "export "))] = strings.Trim(strings.TrimSpace(v), `"'`)
	}
	return vals, sc.Err()
}

// IgnoreCanceled returns nil when ctx is done (a signal asked the service to stop, so its
// error is the expected shutdown) and err otherwise.
func IgnoreCanceled(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// Main runs root with a context canceled by SIGINT or SIGTERM and exits the process: 0 on
// success, 1 after printing the error prefixed with root's name.
func Main(root *cobra.Command) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	root.SilenceUsage = true
	root.SilenceErrors = true
	AddVersion(root)
	shutdown, err := SetupTracing(ctx, root.Name())
	if err != nil {
		fmt.Fprintln(os.Stderr, root.Name()+":", err)
		os.Exit(1)
	}
	err = root.ExecuteContext(ctx)
	shutdown()
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, root.Name()+":", err)
		os.Exit(1)
	}
}
