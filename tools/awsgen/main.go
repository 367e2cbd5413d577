// Command awsgen turns an AWS service model (botocore's JSON form: api/ecs/ecs-2014-11-13.json,
// api/secretsmanager/..., api/sts/...) into the protobuf contract Berth's gateway and
// scheduler share for that service:
//
//   - proto/berth/<svc>/v1/shapes.proto: one message per structure shape, members in
//     alphabetical order, each field's json_name the AWS member name (case-sensitive);
//   - proto/berth/<svc>/v1/<svc>_service.proto: one service with one RPC per operation.
//
// Each RPC takes <Operation>Request and returns <Operation>Response (buf's STANDARD lint).
// When the model names an operation's input or output shape otherwise (SSM's
// PutParameterResult) the message is that shape under the standard name, and an operation
// without input or output gets an empty message.
//
// Mapping: string and enum shapes → string; integer → int32; long → int64; double/float →
// double; boolean → bool; blob → bytes (base64 on the JSON wire); timestamp → double (epoch
// seconds, as the JSON protocols carry them); list → repeated; map → map<string, V>. A list
// or map nested in a list or map (Secrets Manager's map of version ids to stage lists)
// becomes a wrapper message named after the inner shape with one field, marked
// (berth.ecs.v1.wrapper) so the codecs write it as the bare collection. Boxed scalars and
// strings get explicit presence (proto3 optional); unboxed scalars do not, so the AWS JSON
// codec always writes them, as AWS does. Required members, enum values and timestamps are
// recorded as field options from berth/ecs/v1/options.proto (shared by every service) so the
// gateway can validate requests against the model without a second copy of it.
//
// Usage:
//
//	go run ./awsgen -model ../api/ecs/ecs-2014-11-13.json -out ../proto/berth/ecs/v1
//	go run ./awsgen -model ../api/sts/sts-2011-06-15.json -out ../proto/berth/sts/v1 \
//	    -package berth.sts.v1 -service StsService -title STS
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"unicode"
)

type shapeRef struct {
	Shape string `json:"shape"`
}

type shape struct {
	Type      string              `json:"type"`
	Members   map[string]shapeRef `json:"members"`
	Required  []string            `json:"required"`
	Member    *shapeRef           `json:"member"`
	Key       *shapeRef           `json:"key"`
	Value     *shapeRef           `json:"value"`
	Enum      []string            `json:"enum"`
	Box       bool                `json:"box"`
	Exception bool                `json:"exception"`
}

type operation struct {
	Name   string    `json:"name"`
	Input  *shapeRef `json:"input"`
	Output *shapeRef `json:"output"`
}

type model struct {
	Metadata   map[string]any       `json:"metadata"`
	Operations map[string]operation `json:"operations"`
	Shapes     map[string]shape     `json:"shapes"`
}

// gen is one generation run: the model and the names it is rendered under.
type gen struct {
	m         *model
	modelPath string // as written in the header, relative to the repository root
	pkg       string // proto package, e.g. "berth.ecs.v1"
	service   string // service name, e.g. "EcsService"
	title     string // the AWS service's short name in comments, e.g. "ECS"
	// messages maps each message name to render to the shape whose members it has ("" for
	// an empty message), in addition to the model's own structure shapes.
	messages map[string]string
	// origin maps an operation message name to the sentence describing where it came from
	// when it is not a model shape of the same name.
	origin map[string]string
	// wrappers are the list and map shapes nested in another collection.
	wrappers map[string]bool
	// boxAll gives every scalar member presence (-box-scalars).
	boxAll bool
}

func main() {
	modelPath := flag.String("model", "api/ecs/ecs-2014-11-13.json", "path of the AWS service model")
	outDir := flag.String("out", "proto/berth/ecs/v1", "directory for the generated .proto files")
	pkg := flag.String("package", "berth.ecs.v1", "proto package of the generated files")
	service := flag.String("service", "EcsService", "name of the generated service")
	title := flag.String("title", "ECS", "the AWS service's short name, for comments")
	// Models converted from Smithy IDL 2.0 (CloudWatch's, whose protocol list starts with
	// smithy-rpc-v2-cbor) carry no "box" traits: their scalar members are nullable unless
	// they have a default, and AWS omits the absent ones (a Datapoint holds only the
	// statistics asked for). -box-scalars gives every scalar member presence.
	boxAll := flag.Bool("box-scalars", false, "treat every scalar member as boxed (optional)")
	flag.Parse()

	raw, err := os.ReadFile(*modelPath)
	if err != nil {
		log.Fatal(err)
	}
	var m model
	if err := json.Unmarshal(raw, &m); err != nil {
		log.Fatalf("parse %s: %v", *modelPath, err)
	}
	g := &gen{
		m:         &m,
		modelPath: strings.TrimPrefix(filepath.ToSlash(*modelPath), "../"),
		pkg:       *pkg,
		service:   *service,
		title:     *title,
		boxAll:    *boxAll,
	}
	if err := g.plan(); err != nil {
		log.Fatal(err)
	}
	shapes, err := g.renderShapes()
	if err != nil {
		log.Fatal(err)
	}
	svc := g.renderService()
	dir := strings.Split(*pkg, ".")
	serviceFile := dir[len(dir)-2] + "_service.proto"
	if err := os.MkdirAll(*outDir, 0o755); err != nil {
		log.Fatal(err)
	}
	for name, content := range map[string][]byte{"shapes.proto": shapes, serviceFile: svc} {
		if err := os.WriteFile(filepath.Join(*outDir, name), content, 0o644); err != nil {
			log.Fatal(err)
		}
	}
}

func (g *gen) header() string {
	return fmt.Sprintf("// Code generated by tools/awsgen from %s. DO NOT EDIT.\n\nsyntax = \"proto3\";\n\npackage %s;\n\n", g.modelPath, g.pkg)
}

// plan decides the operation messages and the wrappers, and refuses a model whose names
// would collide.
func (g *gen) plan() error {
	g.messages, g.origin, g.wrappers = map[string]string{}, map[string]string{}, map[string]bool{}
	referenced := map[string]bool{}
	for _, s := range g.m.Shapes {
		for _, r := range s.Members {
			referenced[r.Shape] = true
		}
		for _, r := range []*shapeRef{s.Member, s.Key, s.Value} {
			if r != nil {
				referenced[r.Shape] = true
			}
		}
	}
	ioShapes := map[string]bool{}
	for _, name := range sortedKeys(g.m.Operations) {
		op := g.m.Operations[name]
		for _, io := range []struct {
			ref    *shapeRef
			suffix string
			what   string
		}{{op.Input, "Request", "input"}, {op.Output, "Response", "output"}} {
			msg := name + io.suffix
			if io.ref == nil {
				if _, taken := g.m.Shapes[msg]; taken {
					return fmt.Errorf("operation %s has no %s but shape %s exists", name, io.what, msg)
				}
				g.messages[msg] = ""
				g.origin[msg] = fmt.Sprintf("the empty %s of the %s action %s (the model has no %s shape).", io.what, g.title, name, io.what)
				continue
			}
			if io.ref.Shape == msg {
				continue
			}
			if _, taken := g.m.Shapes[msg]; taken {
				return fmt.Errorf("operation %s: %s shape is %s but shape %s exists", name, io.what, io.ref.Shape, msg)
			}
			g.messages[msg] = io.ref.Shape
			g.origin[msg] = fmt.Sprintf("the %s API shape %s, the %s of %s.", g.title, io.ref.Shape, io.what, name)
			ioShapes[io.ref.Shape] = true
		}
	}
	for name, s := range g.m.Shapes {
		if s.Type != "structure" || s.Exception {
			continue
		}
		if ioShapes[name] && !referenced[name] {
			continue // rendered only under its operation's standard name
		}
		g.messages[name] = name
	}
	for _, s := range g.m.Shapes {
		var inner []*shapeRef
		switch s.Type {
		case "list":
			inner = append(inner, s.Member)
		case "map":
			inner = append(inner, s.Value)
		}
		for _, r := range inner {
			if t := g.m.Shapes[r.Shape].Type; t == "list" || t == "map" {
				g.wrappers[r.Shape] = true
			}
		}
	}
	return nil
}

func (g *gen) renderShapes() ([]byte, error) {
	m := g.m
	var b bytes.Buffer
	b.WriteString(g.header())
	b.WriteString("import \"berth/ecs/v1/options.proto\";\n\n")
	for _, name := range sortedKeys(g.messages) {
		if g.wrappers[name] {
			return nil, fmt.Errorf("wrapper %s collides with a message", name)
		}
		s := m.Shapes[g.messages[name]]
		if origin := g.origin[name]; origin != "" {
			fmt.Fprintf(&b, "// %s is %s\n", name, origin)
		} else {
			fmt.Fprintf(&b, "// %s is the %s API shape of the same name.\n", name, g.title)
		}
		if len(s.Members) == 0 {
			fmt.Fprintf(&b, "message %s {}\n\n", name)
			continue
		}
		required := map[string]bool{}
		for _, r := range s.Required {
			required[r] = true
		}
		fmt.Fprintf(&b, "message %s {\n", name)
		for i, member := range sortedKeys(s.Members) {
			if m.Shapes[s.Members[member].Shape].Exception {
				// An event stream's error event (CloudWatch Logs' StartLiveTail): errors
				// are not messages here; the stream itself is not served.
				continue
			}
			decl, err := g.fieldDecl(s.Members[member].Shape)
			if err != nil {
				return nil, fmt.Errorf("%s.%s: %w", name, member, err)
			}
			var opts []string
			opts = append(opts, fmt.Sprintf("json_name = %q", member))
			if required[member] {
				opts = append(opts, "(berth.ecs.v1.required) = true")
			}
			target := m.Shapes[s.Members[member].Shape]
			if target.Type == "list" {
				target = m.Shapes[target.Member.Shape]
			}
			for _, e := range target.Enum {
				opts = append(opts, fmt.Sprintf("(berth.ecs.v1.enum_values) = %q", e))
			}
			if m.Shapes[s.Members[member].Shape].Type == "timestamp" {
				opts = append(opts, "(berth.ecs.v1.timestamp) = true")
			}
			fmt.Fprintf(&b, "  %s %s = %d [\n    %s\n  ];\n", decl, snake(member), i+1, strings.Join(opts, ",\n    "))
		}
		b.WriteString("}\n\n")
	}
	for _, name := range sortedKeys(g.wrappers) {
		s := m.Shapes[name]
		decl, err := g.fieldDecl(name)
		if err != nil {
			return nil, fmt.Errorf("wrapper %s: %w", name, err)
		}
		field := "values"
		if s.Type == "map" {
			field = "entries"
		}
		fmt.Fprintf(&b, "// %s wraps the %s API %s shape of the same name, which the model nests in\n", name, g.title, s.Type)
		fmt.Fprintf(&b, "// another collection; on the wire it is the bare %s.\n", s.Type)
		fmt.Fprintf(&b, "message %s {\n  option (berth.ecs.v1.wrapper) = true;\n", name)
		fmt.Fprintf(&b, "  %s %s = 1 [json_name = %q];\n}\n\n", decl, field, field)
	}
	return bytes.TrimRight(b.Bytes(), "\n"), nil
}

// fieldDecl returns the declaration (label and type) of a member of shape shapeName.
func (g *gen) fieldDecl(shapeName string) (string, error) {
	m := g.m
	s, ok := m.Shapes[shapeName]
	if !ok {
		return "", fmt.Errorf("unknown shape %q", shapeName)
	}
	switch s.Type {
	case "structure":
		// A document shape (free-form JSON) is an empty message: the codec refuses any
		// member in it, so it is never silently dropped.
		return shapeName, nil
	case "list":
		elem, err := g.elemDecl(s.Member.Shape)
		if err != nil {
			return "", err
		}
		return "repeated " + elem, nil
	case "map":
		if m.Shapes[s.Key.Shape].Type != "string" {
			return "", fmt.Errorf("map %s has a key that is not a string", shapeName)
		}
		elem, err := g.elemDecl(s.Value.Shape)
		if err != nil {
			return "", err
		}
		return "map<string, " + elem + ">", nil
	case "string":
		return "optional string", nil
	case "timestamp":
		return "optional double", nil
	case "blob":
		return "optional bytes", nil
	}
	scalar := scalars[s.Type]
	if scalar == "" {
		return "", fmt.Errorf("shape %s has unsupported type %s", shapeName, s.Type)
	}
	if s.Box || g.boxAll {
		return "optional " + scalar, nil
	}
	return scalar, nil
}

var scalars = map[string]string{"integer": "int32", "long": "int64", "double": "double", "float": "double", "boolean": "bool"}

// elemDecl returns the type of a list element or map value of shape shapeName: a nested
// collection becomes its wrapper message.
func (g *gen) elemDecl(shapeName string) (string, error) {
	s, ok := g.m.Shapes[shapeName]
	if !ok {
		return "", fmt.Errorf("unknown shape %q", shapeName)
	}
	switch s.Type {
	case "list", "map":
		return shapeName, nil
	case "structure":
		return g.fieldDecl(shapeName)
	case "string":
		return "string", nil
	case "timestamp":
		return "double", nil
	case "blob":
		return "bytes", nil
	}
	if scalar := scalars[s.Type]; scalar != "" {
		return scalar, nil
	}
	return "", fmt.Errorf("shape %s has unsupported type %s", shapeName, s.Type)
}

func (g *gen) renderService() []byte {
	var b bytes.Buffer
	b.WriteString(g.header())
	fmt.Fprintf(&b, "import \"%s/shapes.proto\";\n\n", strings.ReplaceAll(g.pkg, ".", "/"))
	fmt.Fprintf(&b, "// %s is the %s API as the scheduler serves it to the gateway: one RPC per\n", g.service, g.title)
	fmt.Fprintf(&b, "// operation of the %s model, with the model's request and response shapes. The\n", g.title)
	b.WriteString("// caller's account travels in the Berth-Account header, set by the gateway from the\n")
	b.WriteString("// SigV4 access key; errors carry a berth.ecs.v1.Exception detail.\n")
	fmt.Fprintf(&b, "service %s {\n", g.service)
	for _, name := range sortedKeys(g.m.Operations) {
		fmt.Fprintf(&b, "  // %s is the %s action of the same name.\n", name, g.title)
		fmt.Fprintf(&b, "  rpc %s(%sRequest) returns (%sResponse);\n", name, name, name)
	}
	b.WriteString("}\n")
	return b.Bytes()
}

func snake(s string) string {
	var b strings.Builder
	runes := []rune(s)
	for i, r := range runes {
		if unicode.IsUpper(r) {
			prevLower := i > 0 && (unicode.IsLower(runes[i-1]) || unicode.IsDigit(runes[i-1]))
			nextLower := i+1 < len(runes) && unicode.IsLower(runes[i+1])
			if i > 0 && (prevLower || (nextLower && unicode.IsUpper(runes[i-1]))) {
				b.WriteByte('_')
			}
			b.WriteRune(unicode.ToLower(r))
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
