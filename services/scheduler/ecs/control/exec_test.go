package control

import (
	"reflect"
	"testing"
)

func TestSplitCommand(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
		bad  bool
	}{
		{in: "echo hello", want: []string{"echo", "hello"}},
		{in: "  /bin/sh  ", want: []string{"/bin/sh"}},
		{in: `sh -c 'echo "$HOME"; ls'`, want: []string{"sh", "-c", `echo "$HOME"; ls`}},
		{in: `printf "a \"b\" \$c \n"`, want: []string{"printf", `a "b" $c \n`}},
		{in: `a\ b c''d ""`, want: []string{"a b", "cd", ""}},
		{in: `echo 'open`, bad: true},
		{in: `echo "open`, bad: true},
		{in: "   ", bad: true},
	} {
		got, err := SplitCommand(tc.in)
		if tc.bad {
			if err == nil {
				t.Errorf("SplitCommand(%q) = %q, want an error", tc.in, got)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("SplitCommand(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
}

func TestStreamURL(t *testing.T) {
	for in, want := range map[string]string{
		"http://127.0.0.1:4566":     "ws://127.0.0.1:4566/v1/data-channel/",
		"https://ecs.example.com/":  "wss://ecs.example.com/v1/data-channel/",
		"https://gw.example.com/b/": "wss://gw.example.com/b/v1/data-channel/",
	} {
		if got, err := streamURL(in); err != nil || got != want {
			t.Errorf("streamURL(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := streamURL(""); err == nil {
		t.Error("streamURL of no endpoint: no error")
	}
}
