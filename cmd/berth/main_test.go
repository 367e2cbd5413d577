package main

import (
	"go/parser"
	"go/token"
	"os"
	"regexp"
	"strings"
	"testing"
)

// TestPackageDocNamesEverySubcommand fails when a subcommand of berth is missing from the
// package doc (what `go doc` shows), or the doc names one berth does not have.
func TestPackageDocNamesEverySubcommand(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "main.go", nil, parser.ParseComments|parser.PackageClauseOnly)
	if err != nil {
		t.Fatal(err)
	}
	doc := f.Doc.Text()
	have := map[string]bool{}
	for _, c := range rootCommand().Commands() {
		have[c.Name()] = true
		if !strings.Contains(doc, "`berth "+c.Name()) {
			t.Errorf("the package doc does not name `berth %s`", c.Name())
		}
	}
	for _, m := range regexp.MustCompile("`berth ([a-z-]+)").FindAllStringSubmatch(doc, -1) {
		if !have[m[1]] {
			t.Errorf("the package doc names `berth %s`, which berth does not have", m[1])
		}
	}
}

// TestReadmeListsEveryDoc fails when a page of docs/ is not linked from the README.
func TestReadmeListsEveryDoc(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir("../../docs")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".md") && !strings.Contains(string(readme), "(docs/"+e.Name()) {
			t.Errorf("README.md does not link docs/%s", e.Name())
		}
	}
}

// TestReadmeLayoutCoversTheTree fails when a folder at the top of the repository (or of
// services/) has no row in the README's layout table, or a row names a path that is not
// there.
func TestReadmeLayoutCoversTheTree(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, layout, ok := strings.Cut(string(readme), "\n## Layout\n")
	if !ok {
		t.Fatal("README.md has no ## Layout section")
	}
	layout, _, _ = strings.Cut(layout, "\n## ")
	var rows []string
	for _, m := range regexp.MustCompile("(?m)^\\| `([^`]+)`").FindAllStringSubmatch(layout, -1) {
		rows = append(rows, m[1])
		if _, err := os.Stat("../../" + m[1]); err != nil {
			t.Errorf("the layout table names %s: %v", m[1], err)
		}
	}
	var dirs []string
	for _, parent := range []string{"", "services/"} {
		entries, err := os.ReadDir("../../" + parent)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			if e.IsDir() && !strings.HasPrefix(e.Name(), ".") && e.Name() != "bin" && e.Name() != "services" {
				dirs = append(dirs, parent+e.Name()+"/")
			}
		}
	}
	for _, d := range dirs {
		covered := false
		for _, r := range rows {
			if strings.HasPrefix(r, d) {
				covered = true
			}
		}
		if !covered {
			t.Errorf("README's layout table has no row for %s", d)
		}
	}
}
