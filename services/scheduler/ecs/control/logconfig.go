package control

import (
	"maps"
	"regexp"
	"sort"
	"strconv"
	"strings"

	ecsv1 "github.com/berthhq/berth/gen/berth/ecs/v1"
	"github.com/berthhq/berth/services/scheduler/platform/awserr"
)

// awslogsOptions are the options of the awslogs driver Berth honours (the ECS developer
// guide's list, less awslogs-endpoint: Berth is the endpoint).
var awslogsOptions = map[string]bool{
	"awslogs-group": true, "awslogs-region": true, "awslogs-stream-prefix": true,
	"awslogs-create-group": true, "mode": true, "max-buffer-size": true,
	"awslogs-multiline-pattern": true, "awslogs-datetime-format": true,
}

var (
	bufferSizeRE = regexp.MustCompile(`^([0-9]+)([kKmMgG]?)[bB]?$`)
	logGroupRE   = regexp.MustCompile(`^[\.\-_/#A-Za-z0-9]{1,512}$`)
)

// checkLogConfiguration checks container i's logConfiguration options against its
// driver: json-file takes none; awslogs takes awslogsOptions, needs awslogs-group (a
// valid log group name), and checks each value as the Docker awslogs driver does. It
// returns a ClientException naming the option.
func checkLogConfiguration(i int, lc *ecsv1.LogConfiguration) error {
	if lc == nil {
		return nil
	}
	p := "containerDefinitions[" + strconv.Itoa(i) + "].logConfiguration.options"
	opts := lc.GetOptions()
	if err := checkSecretOptions(i, lc); err != nil {
		return err
	}
	if lc.GetLogDriver() != "awslogs" {
		if len(opts) > 0 {
			return awserr.New(ClientErr, "%s is not supported for logDriver %q: Berth's json-file logs take no options (the agent sets rotation and retention).", p, lc.GetLogDriver())
		}
		return nil
	}
	if _, fromSecret := secretOptionNames(lc)["awslogs-group"]; fromSecret {
		// The group is a secret's value, known at task start only: the agent checks it
		// then (a bad one stops the task with ResourceInitializationError).
		if opts == nil {
			opts = map[string]string{}
		}
		opts = maps.Clone(opts)
		opts["awslogs-group"] = "from-secret"
	}
	names := make([]string, 0, len(opts))
	for k := range opts {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		if !awslogsOptions[k] {
			return awserr.New(ClientErr, "%s: unknown log opt '%s' for awslogs log driver; Berth supports awslogs-group, awslogs-region, awslogs-stream-prefix, awslogs-create-group, mode, max-buffer-size, awslogs-multiline-pattern and awslogs-datetime-format.", p, k)
		}
	}
	if g := opts["awslogs-group"]; !logGroupRE.MatchString(g) {
		return awserr.New(ClientErr, "%s: awslogs-group must be a log group name (1-512 of letters, digits, '.', '-', '_', '/', '#'), got %q.", p, g)
	}
	if r, ok := opts["awslogs-region"]; ok && !regionRE.MatchString(r) {
		return awserr.New(ClientErr, "%s: awslogs-region %q is not a region name.", p, r)
	}
	if sp, ok := opts["awslogs-stream-prefix"]; ok && (sp == "" || strings.ContainsAny(sp, ":*")) {
		return awserr.New(ClientErr, "%s: awslogs-stream-prefix %q must be non-empty without ':' or '*'.", p, sp)
	}
	if v, ok := opts["awslogs-create-group"]; ok {
		if _, err := strconv.ParseBool(v); err != nil {
			return awserr.New(ClientErr, "%s: awslogs-create-group must be true or false, got %q.", p, v)
		}
	}
	mode, ok := opts["mode"]
	if ok && mode != "blocking" && mode != "non-blocking" {
		return awserr.New(ClientErr, "%s: mode must be blocking or non-blocking, got %q.", p, mode)
	}
	if v, ok := opts["max-buffer-size"]; ok {
		if mode == "blocking" {
			return awserr.New(ClientErr, "%s: max-buffer-size is only supported with mode non-blocking.", p)
		}
		if m := bufferSizeRE.FindStringSubmatch(v); m == nil || m[1] == "0" {
			return awserr.New(ClientErr, "%s: max-buffer-size %q is not a size such as 25m.", p, v)
		}
	}
	mp, hasMP := opts["awslogs-multiline-pattern"]
	if hasMP {
		if _, err := regexp.Compile(mp); err != nil {
			return awserr.New(ClientErr, "%s: awslogs-multiline-pattern %q is not a regular expression: %v", p, mp, err)
		}
	}
	if _, ok := opts["awslogs-datetime-format"]; ok && hasMP {
		return awserr.New(ClientErr, "%s: you cannot configure log opt 'awslogs-datetime-format' and 'awslogs-multiline-pattern' at the same time.", p)
	}
	return nil
}

var regionRE = regexp.MustCompile(`^[a-z]{2}(-[a-z]+)+-[0-9]+$`)

// secretOptionNames returns the names lc.secretOptions sets.
func secretOptionNames(lc *ecsv1.LogConfiguration) map[string]struct{} {
	out := map[string]struct{}{}
	for _, so := range lc.GetSecretOptions() {
		out[so.GetName()] = struct{}{}
	}
	return out
}

// checkSecretOptions checks container i's logConfiguration.secretOptions as ECS does:
// each needs a name and a valueFrom (resolved at task start like secrets[].valueFrom),
// the name must be an option of the driver (awslogsOptions; json-file takes none), and
// no option may be set both in options and in secretOptions or twice in secretOptions.
// It returns a ClientException naming the entry.
func checkSecretOptions(i int, lc *ecsv1.LogConfiguration) error {
	seen := map[string]bool{}
	for j, so := range lc.GetSecretOptions() {
		p := "containerDefinitions[" + strconv.Itoa(i) + "].logConfiguration.secretOptions[" + strconv.Itoa(j) + "]"
		name := so.GetName()
		switch {
		case name == "":
			return awserr.New(ClientErr, "%s.name must not be empty.", p)
		case so.GetValueFrom() == "":
			return awserr.New(ClientErr, "%s.valueFrom must not be empty: give a Secrets Manager secret ARN or an SSM parameter name or ARN.", p)
		case lc.GetLogDriver() != "awslogs":
			return awserr.New(ClientErr, "%s is not supported for logDriver %q: Berth's json-file logs take no options.", p, lc.GetLogDriver())
		case !awslogsOptions[name]:
			return awserr.New(ClientErr, "%s: unknown log opt '%s' for awslogs log driver; Berth supports awslogs-group, awslogs-region, awslogs-stream-prefix, awslogs-create-group, mode, max-buffer-size, awslogs-multiline-pattern and awslogs-datetime-format.", p, name)
		case seen[name]:
			return awserr.New(ClientErr, "%s: log opt '%s' is given twice in secretOptions.", p, name)
		}
		if _, ok := lc.GetOptions()[name]; ok {
			return awserr.New(ClientErr, "%s: log opt '%s' is given in both options and secretOptions.", p, name)
		}
		seen[name] = true
	}
	return nil
}
