package dbtest_test

import (
	"go/parser"
	"go/token"
	"os"
	"strings"
	"testing"
)

// packageDoc returns the package documentation of sqlfence, as go doc
// shows it: code blocks indented by a tab.
func packageDoc(t *testing.T) string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), "../../doc.go", nil, parser.ParseComments|parser.PackageClauseOnly)
	if err != nil {
		t.Fatal(err)
	}
	if f.Doc == nil {
		t.Fatal("../../doc.go has no package documentation")
	}
	return f.Doc.Text()
}

// indent returns code as a doc comment's code block.
func indent(code string) string {
	var b strings.Builder
	for line := range strings.Lines(code) {
		if strings.TrimSpace(line) != "" {
			b.WriteString("\t")
		}
		b.WriteString(line)
	}
	return b.String()
}

// The program in sqlfence's package documentation is Example_storeTx, as
// a main package: it compiles and runs as written, driver import included.
func TestDoc_example(t *testing.T) {
	src, err := os.ReadFile("example_test.go")
	if err != nil {
		t.Fatal(err)
	}
	s := string(src)
	imports := s[strings.Index(s, "import ("):strings.Index(s, "\n// Store.Tx fences")]
	fn := s[strings.Index(s, "func Example_storeTx() {"):strings.Index(s, "\t// Output:")]
	prog := "package main\n\n" + imports + "\n" + strings.Replace(fn, "func Example_storeTx() {", "func main() {", 1) + "}\n"
	if doc := packageDoc(t); !strings.Contains(doc, indent(prog)) {
		t.Errorf("sqlfence's package documentation does not show Example_storeTx as a program; want it to contain\n%s", indent(prog))
	}
}
