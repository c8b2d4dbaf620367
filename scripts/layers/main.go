// Command layers prints the shape of the root package of the module in the
// current directory: its exported surface (the names go doc -all lists,
// with methods and interface methods, struct fields aside), its arrows
// between files, the fewest that can run back up in any order of the files
// and the ones that run back up in the order that docs/engine.md draws,
// the calls from Client.Obtain that climb back up, and the shape that
// issue #34 holds the code to (the longest functions and files, the
// largest structs, the reads of the time).
//
//	go run ./scripts/layers
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/redlock-go/redlock/internal/layers"
)

func main() {
	verbose := flag.Bool("v", false, "list the surface, the arrows that run back up and the climbs")
	flag.Parse()
	p, err := layers.Load(".", "github.com/redlock-go/redlock")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	surface := p.Surface(true)
	fmt.Printf("surface: %d exported names, %d with the methods of interfaces\n", len(p.Surface(false)), len(surface))
	if *verbose {
		fmt.Println("  " + strings.Join(surface, " "))
	}
	fmt.Printf("boxes: %d (%d files), arrows: %d\n", len(p.Boxes()), len(p.Files), p.Arrows())
	best, err := p.BestOrder()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	report := func(what string, order []string) {
		up := p.Up(order)
		climbs := p.Climbs("client.go:Client.Obtain", order)
		fmt.Printf("%s: %d arrows run back up, %d calls from Client.Obtain climb back up\n  order: %s\n", what, len(up), len(climbs), strings.Join(order, " "))
		if *verbose {
			for _, a := range up {
				fmt.Printf("  up    %s -> %s: %s\n", a[0], a[1], strings.Join(p.Names[a[0]+" -> "+a[1]], " "))
			}
			for _, c := range climbs {
				fmt.Printf("  climb %s -> %s\n", c[0], c[1])
			}
		}
	}
	report("fewest", best)
	shape, err := layers.MeasureShape(".")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	top := func(what string, m []layers.Measure, n int) {
		fmt.Printf("%s:", what)
		for _, x := range m[:min(n, len(m))] {
			fmt.Printf(" %s %d,", x.Name, x.N)
		}
		fmt.Println()
	}
	top("longest functions (root package, lines)", shape.Funcs, 5)
	top("longest files (root package, lines)", shape.Files, 5)
	top("largest structs (repository, fields)", shape.Structs, 5)
	fmt.Printf("time reads outside the Client's clock (root package): %d %s\n", len(shape.TimeReads), strings.Join(shape.TimeReads, ", "))
	if doc, err := layers.Documented("docs/engine.md"); err == nil {
		report("docs/engine.md", doc)
	}
}
