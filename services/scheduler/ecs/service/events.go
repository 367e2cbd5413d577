package service

import (
	"fmt"
	"strings"
	"time"

	"google.golang.org/protobuf/proto"

	ecsv1 "github.com/berthhq/berth/gen/berth/ecs/v1"
	"github.com/berthhq/berth/services/scheduler/ecs/placement"
	"github.com/berthhq/berth/services/scheduler/platform/arn"
	"github.com/berthhq/berth/services/scheduler/platform/awsapi"
)

// MaxEvents is how many events a service keeps, newest first (AWS shows the latest 100).
const MaxEvents = 100

// events collects one pass's service events in order of occurrence.
type events struct {
	svc  string
	now  time.Time
	msgs []string
}

func (e *events) add(msg string) { e.msgs = append(e.msgs, msg) }

// steady adds the steady-state event unless it is already the newest one (AWS repeats it
// only every few hours while nothing else happens).
func (e *events) steady(s *ecsv1.Service) {
	msg := fmt.Sprintf("(service %s) has reached a steady state.", e.svc)
	if len(e.msgs) == 0 && len(s.GetEvents()) > 0 && s.GetEvents()[0].GetMessage() == msg {
		return
	}
	e.add(msg)
}

// apply prepends the collected events to s.events (newest first), skipping a message
// equal to the newest one already there (a placement failure repeats every pass), and
// keeps at most MaxEvents.
func (e *events) apply(s *ecsv1.Service) {
	for _, m := range e.msgs {
		if len(s.Events) > 0 && s.Events[0].GetMessage() == m {
			continue
		}
		s.Events = append([]*ecsv1.ServiceEvent{{
			Id:        proto.String(newEventID()),
			CreatedAt: proto.Float64(awsapi.Epoch(e.now)),
			Message:   proto.String(m),
		}}, s.Events...)
	}
	if len(s.Events) > MaxEvents {
		s.Events = s.Events[:MaxEvents]
	}
}

// taskList formats task ids as AWS's events do: "(task a) (task b)".
func taskList(ids []string) string {
	parts := make([]string, len(ids))
	for i, id := range ids {
		parts[i] = "(task " + id + ")"
	}
	return strings.Join(parts, " ")
}

// placementMessage is AWS's event for a task the scheduler could not place, naming the
// closest matching instance and what it lacks.
func placementMessage(svc string, failures []placement.Failure) string {
	prefix := fmt.Sprintf("(service %s) was unable to place a task because no container instance met all of its requirements.", svc)
	const suffix = " For more information, see the Troubleshooting section."
	if len(failures) == 0 {
		return prefix + " Reason: No Container Instances were found in your cluster." + suffix
	}
	f := failures[0]
	for _, x := range failures {
		// Prefer a resource shortfall: AWS names the closest match, one that passed the
		// constraints.
		if strings.HasPrefix(x.Reason, "RESOURCE:") {
			f = x
			break
		}
	}
	id := f.Arn
	if a, err := arn.Parse(f.Arn); err == nil {
		id = a.Name
	}
	switch f.Reason {
	case placement.ReasonCPU:
		return prefix + fmt.Sprintf(" The closest matching (container-instance %s) has insufficient CPU units available.", id) + suffix
	case placement.ReasonMemory:
		return prefix + fmt.Sprintf(" The closest matching (container-instance %s) has insufficient memory available.", id) + suffix
	case placement.ReasonPorts, placement.ReasonPortsUDP:
		return prefix + fmt.Sprintf(" The closest matching (container-instance %s) is already using a port required by your task.", id) + suffix
	case placement.ReasonAttribute:
		return prefix + fmt.Sprintf(" The closest matching (container-instance %s) is missing an attribute required by your task.", id) + suffix
	case placement.ReasonAgent:
		return prefix + fmt.Sprintf(" The closest matching (container-instance %s) encountered error \"AGENT\".", id) + suffix
	}
	return prefix + " Reason: No Container Instances were found in your cluster." + suffix
}
