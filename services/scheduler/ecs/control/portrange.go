package control

import (
	"fmt"
	"strconv"
	"strings"

	ecsv1 "github.com/berthhq/berth/gen/berth/ecs/v1"
	"github.com/berthhq/berth/services/scheduler/platform/awserr"
)

// MaxPortRangesPerContainer is how many portMappings with a containerPortRange one
// container may have, AWS's limit ("You can specify a maximum of 100 port ranges per
// container", PortMapping.containerPortRange).
const MaxPortRangesPerContainer = 100

// ParsePortRange parses a containerPortRange ("first-last", ports 1–65535, first less
// than last, as PortMapping.containerPortRange requires) and returns its first and last
// port; ok is false when s is not such a range.
func ParsePortRange(s string) (first, last int32, ok bool) {
	a, b, found := strings.Cut(s, "-")
	if !found {
		return 0, 0, false
	}
	lo, err1 := strconv.Atoi(a)
	hi, err2 := strconv.Atoi(b)
	if err1 != nil || err2 != nil || lo < 1 || hi > 65535 || lo >= hi || a != strconv.Itoa(lo) || b != strconv.Itoa(hi) {
		return 0, 0, false
	}
	return int32(lo), int32(hi), true
}

// checkPortRanges applies AWS's rules for PortMapping.containerPortRange to the port
// mappings of container name in a task definition of networkMode mode: only bridge and
// awsvpc; neither containerPort nor hostPort with it (the host ports are chosen: the same
// range for awsvpc, a free range of the ephemeral ports for bridge); "first-last" with
// ports 1–65535 and first < last; at most MaxPortRangesPerContainer ranges; a container
// port in one mapping only (no overlapping ranges, no single containerPort inside a
// range). Errors are ClientException naming the container and the field.
func checkPortRanges(name, mode string, pms []*ecsv1.PortMapping) error {
	type span struct{ lo, hi int32 }
	var spans []span
	ranges := 0
	for _, pm := range pms {
		if pm == nil || pm.ContainerPortRange == nil {
			continue
		}
		r := pm.GetContainerPortRange()
		if mode != "bridge" && mode != "awsvpc" {
			return awserr.Clientf("Invalid port mapping for container '%s': containerPortRange is only supported when networkMode is bridge or awsvpc.", name)
		}
		if pm.ContainerPort != nil {
			return awserr.Clientf("Invalid port mapping for container '%s': containerPort and containerPortRange cannot both be specified.", name)
		}
		if pm.HostPort != nil {
			return awserr.Clientf("Invalid port mapping for container '%s': hostPort cannot be specified with containerPortRange; the host ports are assigned.", name)
		}
		lo, hi, ok := ParsePortRange(r)
		if !ok {
			return awserr.Clientf("Invalid containerPortRange %q for container '%s': expected first-last with ports between 1 and 65535 and the first port less than the last.", r, name)
		}
		if ranges++; ranges > MaxPortRangesPerContainer {
			return awserr.Clientf("Invalid port mappings for container '%s': at most %d containerPortRange mappings are allowed per container.", name, MaxPortRangesPerContainer)
		}
		spans = append(spans, span{lo, hi})
	}
	if len(spans) == 0 {
		return nil
	}
	for _, pm := range pms {
		if pm != nil && pm.ContainerPort != nil {
			spans = append(spans, span{pm.GetContainerPort(), pm.GetContainerPort()})
		}
	}
	for i := range spans {
		for j := i + 1; j < len(spans); j++ {
			if spans[i].lo <= spans[j].hi && spans[j].lo <= spans[i].hi {
				return awserr.Clientf("Invalid port mappings for container '%s': container ports %s and %s overlap; a port can be in one port mapping only.", name, spanString(spans[i].lo, spans[i].hi), spanString(spans[j].lo, spans[j].hi))
			}
		}
	}
	return nil
}

func spanString(lo, hi int32) string {
	if lo == hi {
		return strconv.Itoa(int(lo))
	}
	return fmt.Sprintf("%d-%d", lo, hi)
}
