package control

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"net/url"
	"strings"
	"time"

	"connectrpc.com/connect"

	ecsv1 "github.com/berthhq/berth/gen/berth/ecs/v1"
	storev1 "github.com/berthhq/berth/gen/berth/store/v1"
	"github.com/berthhq/berth/services/scheduler/platform/awsapi"
	"github.com/berthhq/berth/services/scheduler/platform/awserr"
	"github.com/berthhq/berth/services/scheduler/platform/caller"
	"github.com/berthhq/berth/services/scheduler/platform/keys"
	"github.com/berthhq/berth/services/scheduler/platform/store"
)

// ECS Exec (docs/exec.md): ExecuteCommand records a session and answers where to join it;
// the gateway serves the streamUrl and agentsession pairs it with the task's agent.

// ExecNotEnabledMessage is AWS's InvalidParameterException text for a task that cannot
// take a command: run without enableExecuteCommand, or its agent not running (stopped).
const ExecNotEnabledMessage = "The execute command failed because execute command was not enabled when the task was run or the execute command agent isn’t running. Wait and try the command again or run a new task with execute command enabled and try again."

// ExecSessionTTL is how long a session's token can be used to join it.
const ExecSessionTTL = 10 * time.Minute

// ExecuteAgentName is the managed agent a task run with enableExecuteCommand shows on
// each container (AWS's ManagedAgent name).
const ExecuteAgentName = "ExecuteCommandAgent"

// ExecuteCommand opens an ECS Exec session on a container of a RUNNING task run with
// enableExecuteCommand, and answers its sessionId, streamUrl (the gateway the call came
// through: ws:// or wss:// and /v1/data-channel/{sessionId}) and tokenValue, which AWS's
// session-manager-plugin joins. The token is good for one join within ExecSessionTTL;
// only its SHA-256 is stored. Errors (InvalidParameterException): interactive false
// ("Interactive is the only mode supported currently."), an empty or unparsable command,
// a task that is not found, not run with enableExecuteCommand or not RUNNING (AWS's
// ExecNotEnabledMessage), a container that is not in the task or missing from a task of
// several containers; ClusterNotFoundException. Each call is logged as the event
// ecs:ExecuteCommand with the principal, task, container and command. AWS reference:
// ExecuteCommand.
func (s *Server) ExecuteCommand(ctx context.Context, req *connect.Request[ecsv1.ExecuteCommandRequest]) (*connect.Response[ecsv1.ExecuteCommandResponse], error) {
	return awsapi.Handle(ctx, s.log, req, func(ctx context.Context, account keys.Scope, m *ecsv1.ExecuteCommandRequest) (*ecsv1.ExecuteCommandResponse, error) {
		if !m.GetInteractive() {
			return nil, awserr.InvalidParameterf("Interactive is the only mode supported currently.")
		}
		if m.GetTask() == "" {
			return nil, awserr.InvalidParameterf("task is required.")
		}
		command := m.GetCommand()
		if strings.TrimSpace(command) == "" {
			return nil, awserr.InvalidParameterf("command is required.")
		}
		if len(command) > 4096 {
			return nil, awserr.InvalidParameterf("command can be at most 4096 characters.")
		}
		args, err := SplitCommand(command)
		if err != nil {
			return nil, awserr.InvalidParameterf("command: %v.", err)
		}
		name, err := ClusterName(account, m.GetCluster())
		if err != nil {
			return nil, err
		}
		if rec, _, err := s.cluster(ctx, account, name); err != nil {
			return nil, err
		} else if rec == nil {
			return nil, awserr.ClusterNotFoundError()
		}
		key, ok, err := s.taskKey(ctx, account, name, m.GetTask())
		if err != nil {
			return nil, err
		}
		if !ok {
			return nil, awserr.InvalidParameterf("The task provided in the request was not found.")
		}
		rec, _, err := get[*storev1.TaskRecord](ctx, s.kv, key)
		if err != nil {
			return nil, err
		}
		if rec == nil {
			return nil, awserr.InvalidParameterf("The task provided in the request was not found.")
		}
		t := rec.GetTask()
		if !t.GetEnableExecuteCommand() || t.GetLastStatus() != "RUNNING" || t.GetDesiredStatus() != "RUNNING" {
			return nil, awserr.InvalidParameterf("%s", ExecNotEnabledMessage)
		}
		var ctr *ecsv1.Container
		switch want := m.GetContainer(); {
		case want != "":
			for _, c := range t.GetContainers() {
				if c.GetName() == want {
					ctr = c
				}
			}
			if ctr == nil {
				return nil, awserr.InvalidParameterf("The container %s was not found in task %s.", want, t.GetTaskArn())
			}
		case len(t.GetContainers()) == 1:
			ctr = t.GetContainers()[0]
		default:
			return nil, awserr.InvalidParameterf("A container name must be specified for tasks containing multiple containers.")
		}
		if ctr.GetLastStatus() != "RUNNING" {
			return nil, awserr.InvalidParameterf("%s", ExecNotEnabledMessage)
		}
		who, _ := caller.From(ctx)
		stream, err := streamURL(who.Endpoint)
		if err != nil {
			return nil, err
		}
		sessionID, token := newExecSession(account)
		sum := sha256.Sum256([]byte(token))
		now := s.now()
		srec := &storev1.ExecSessionRecord{
			SessionId: sessionID, TokenSha256: sum[:], TaskArn: t.GetTaskArn(), Cluster: name,
			ContainerName: ctr.GetName(), Command: command, ContainerInstanceArn: t.GetContainerInstanceArn(),
			PrincipalArn: who.PrincipalARN, CreatedAt: now.Unix(), Args: args,
		}
		s.dropExpiredExecSessions(ctx, account, now)
		if _, err := store.Create(ctx, s.kv, keys.ExecSession(account, sessionID), srec); err != nil {
			return nil, err
		}
		s.log.Info("ecs:ExecuteCommand", "principal", who.PrincipalARN, "account", account.Account,
			"task", t.GetTaskArn(), "container", ctr.GetName(), "command", command, "session", sessionID)
		return &ecsv1.ExecuteCommandResponse{
			ClusterArn: t.ClusterArn, ContainerArn: ctr.ContainerArn, ContainerName: ctr.Name,
			Interactive: true, TaskArn: t.TaskArn,
			Session: &ecsv1.Session{
				SessionId:  &sessionID,
				StreamUrl:  strPtr(stream + sessionID + "?role=publish_subscribe"),
				TokenValue: &token,
			},
		}, nil
	})
}

// newExecSession returns a session id (AWS's form: "ecs-execute-command-" and 17 hex
// digits) and a token: the account and region (which the gateway needs to route the
// join) and 32 random bytes, dot-separated.
func newExecSession(account keys.Scope) (id, token string) {
	var b [9]byte
	_, _ = rand.Read(b[:])
	id = "ecs-execute-command-" + hex.EncodeToString(b[:])[:17]
	var t [32]byte
	_, _ = rand.Read(t[:])
	return id, account.Account + "." + account.Region + "." + base64.RawURLEncoding.EncodeToString(t[:])
}

// streamURL is the data channel prefix on the gateway at endpoint (its base URL as the
// caller reached it): ws:// for http://, wss:// for https://.
func streamURL(endpoint string) (string, error) {
	u, err := url.Parse(endpoint)
	if err != nil || u.Host == "" {
		return "", awserr.New("ServerException", "The gateway did not say where it is reached, so no session can be opened.")
	}
	switch u.Scheme {
	case "https":
		u.Scheme = "wss"
	default:
		u.Scheme = "ws"
	}
	return u.Scheme + "://" + u.Host + strings.TrimRight(u.Path, "/") + "/v1/data-channel/", nil
}

// dropExpiredExecSessions deletes the account's sessions nobody joined within
// ExecSessionTTL (best effort: a failure leaves them for the next call).
func (s *Server) dropExpiredExecSessions(ctx context.Context, account keys.Scope, now time.Time) {
	items, err := store.ListAll[*storev1.ExecSessionRecord](ctx, s.kv, keys.ExecSessions(account))
	if err != nil {
		return
	}
	for _, it := range items {
		if now.Sub(time.Unix(it.Value.GetCreatedAt(), 0)) > ExecSessionTTL {
			_, _ = store.Delete(ctx, s.kv, it.Key, it.ModRevision)
		}
	}
}

// SplitCommand splits an ExecuteCommand command into a program and its arguments as a
// POSIX shell splits words: blanks separate them, single quotes keep everything, double
// quotes keep all but backslash escapes of " \ $ and `, a backslash outside quotes keeps
// the next character. Nothing is expanded; run "sh -c '…'" for a shell.
func SplitCommand(cmd string) ([]string, error) {
	var (
		args  []string
		cur   strings.Builder
		inArg bool
	)
	r := []rune(cmd)
	for i := 0; i < len(r); i++ {
		c := r[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n':
			if inArg {
				args = append(args, cur.String())
				cur.Reset()
				inArg = false
			}
		case c == '\'':
			inArg = true
			j := i + 1
			for j < len(r) && r[j] != '\'' {
				j++
			}
			if j == len(r) {
				return nil, fmt.Errorf("unterminated single quote")
			}
			cur.WriteString(string(r[i+1 : j]))
			i = j
		case c == '"':
			inArg = true
			j := i + 1
			for ; j < len(r) && r[j] != '"'; j++ {
				if r[j] == '\\' && j+1 < len(r) && strings.ContainsRune("\"\\$`", r[j+1]) {
					j++
				}
				cur.WriteRune(r[j])
			}
			if j == len(r) {
				return nil, fmt.Errorf("unterminated double quote")
			}
			i = j
		case c == '\\':
			inArg = true
			if i+1 < len(r) {
				i++
				cur.WriteRune(r[i])
			}
		default:
			inArg = true
			cur.WriteRune(c)
		}
	}
	if inArg {
		args = append(args, cur.String())
	}
	if len(args) == 0 {
		return nil, fmt.Errorf("no program to run")
	}
	return args, nil
}
