// Command apisurface prints how many exported identifiers each public
// package of the module has, as go doc shows them: types, functions,
// methods, constants, variables, exported fields of exported structs and
// methods of exported interfaces, in the non-test files. Run it from the
// module's root:
//
//	go run ./internal/tools/apisurface        # counts
//	go run ./internal/tools/apisurface -v     # and every name
//
// Its test holds the budgets: at most 260 for the core library packages
// together, at most 110 for zktest, and one for each recipe package beyond
// the core (recipePackages).
package main

import (
	"flag"
	"fmt"
	"go/ast"
	"go/doc"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"sort"
	"strings"
)

// libraryPackages are the core packages a service imports; the recipes
// beyond them and zktest are counted apart.
var libraryPackages = []string{"session", "recipes", "mutex", "rwlock", "semaphore", "leader"}

// recipePackages are the recipes beyond the core, each counted apart with a
// budget of its own.
var recipePackages = []struct {
	dir    string
	budget int
}{
	{"recipes/barrier", 20},
	{"recipes/counter", 25},
	{"recipes/cache", 51},
	{"recipes/group", 30},
	{"recipes/discovery", 64},
}

func main() {
	verbose := flag.Bool("v", false, "list every exported name")
	flag.Parse()
	show := func(label string, names []string) {
		fmt.Printf("%-16s %4d\n", label, len(names))
		if *verbose {
			for _, n := range names {
				fmt.Println("   ", n)
			}
		}
	}
	count := func(dir string) []string {
		names, err := exported(dir)
		if err != nil {
			fmt.Fprintln(os.Stderr, "apisurface:", err)
			os.Exit(1)
		}
		return names
	}
	total := 0
	for _, dir := range libraryPackages {
		names := count(dir)
		total += len(names)
		show(dir, names)
	}
	fmt.Printf("%-16s %4d\n", "(core)", total)
	for _, rp := range recipePackages {
		show(rp.dir, count(rp.dir))
	}
	show("zktest", count("zktest"))
}

// exported returns the exported identifiers of the package in dir, each as
// "kind Name" or "kind Type.Name", sorted.
func exported(dir string) ([]string, error) {
	fset := token.NewFileSet()
	pkgs, err := parser.ParseDir(fset, dir, func(fi fs.FileInfo) bool {
		return !strings.HasSuffix(fi.Name(), "_test.go")
	}, parser.ParseComments)
	if err != nil {
		return nil, err
	}
	var names []string
	add := func(kind, name string) {
		if ast.IsExported(name) {
			names = append(names, kind+" "+name)
		}
	}
	values := func(kind string, vs []*doc.Value) {
		for _, v := range vs {
			for _, n := range v.Names {
				add(kind, n)
			}
		}
	}
	for _, p := range pkgs {
		d := doc.New(p, dir, 0)
		values("const", d.Consts)
		values("var", d.Vars)
		for _, f := range d.Funcs {
			add("func", f.Name)
		}
		for _, t := range d.Types {
			add("type", t.Name)
			values("const", t.Consts)
			values("var", t.Vars)
			for _, f := range t.Funcs {
				add("func", f.Name)
			}
			for _, m := range t.Methods {
				add("method", t.Name+"."+m.Name)
			}
			switch st := t.Decl.Specs[0].(*ast.TypeSpec).Type.(type) {
			case *ast.StructType:
				for _, f := range st.Fields.List {
					for _, n := range f.Names {
						add("field", t.Name+"."+n.Name)
					}
				}
			case *ast.InterfaceType:
				for _, f := range st.Methods.List {
					for _, n := range f.Names {
						add("method", t.Name+"."+n.Name)
					}
				}
			}
		}
	}
	sort.Strings(names)
	return names, nil
}
