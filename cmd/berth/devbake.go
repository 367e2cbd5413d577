package main

import (
	"fmt"
	"time"

	"github.com/berthhq/berth/cmd/berth/internal/cli"
)

// devBakeMinute parses BERTH_DEV_BAKE_MINUTE, the length of one minute of the bake times
// and lifecycle hook timeouts of BLUE_GREEN, LINEAR and CANARY deployments under `berth
// dev` (a Go duration such as "1s"; unset: a real minute). It lets a test watch a linear
// deployment bake between its steps (docs/deployments.md).
func devBakeMinute() (time.Duration, error) {
	v := cli.Env("BERTH_DEV_BAKE_MINUTE", "")
	if v == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("BERTH_DEV_BAKE_MINUTE=%q: want a positive duration such as 1s", v)
	}
	return d, nil
}
