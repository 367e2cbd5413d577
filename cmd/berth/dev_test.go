package main

import (
	"slices"
	"testing"

	"github.com/berthhq/berth/services/gateway/sigv4"
)

// TestDevRegions: berth dev's allow-list always admits its own agent's region.
func TestDevRegions(t *testing.T) {
	if r, err := devRegions(devConfig{Region: "us-east-1"}); err != nil || r != nil {
		t.Errorf("default: %v %v; want the gateway's default (nil)", r, err)
	}
	if r, err := devRegions(devConfig{Region: "local"}); err != nil || !slices.Contains(r, "local") || !slices.Contains(r, "eu-west-1") || len(r) != len(sigv4.PublicRegions)+1 {
		t.Errorf("own region: %v %v", r, err)
	}
	if r, err := devRegions(devConfig{Region: "eu-west-1", Regions: []string{"eu-west-1", "us-east-1"}}); err != nil || len(r) != 2 {
		t.Errorf("BERTH_REGIONS: %v %v", r, err)
	}
	if _, err := devRegions(devConfig{Region: "eu-west-1", Regions: []string{"us-east-1"}}); err == nil {
		t.Error("BERTH_REGIONS without BERTH_REGION accepted")
	}
}
