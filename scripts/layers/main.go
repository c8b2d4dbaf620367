// Command layers prints the shape of the root package of the module in the
// current directory: its exported surface (the names go doc -all lists,
// with methods and interface methods, struct fields aside), its boxes and
// arrows between files, and the shape that internal/layers' TestShape
// holds the code to (the longest functions and files, the largest
// structs, the reads of the time, the types with the most methods and the
// files without a test file of their own).
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
	fmt.Print("most methods (root package, methods in files):")
	for _, ty := range shape.Types[:min(5, len(shape.Types))] {
		fmt.Printf(" %s %d in %d,", ty.Name, ty.Methods, len(ty.Files))
	}
	fmt.Println()
	fmt.Printf("source files without a test file of their own (root package): %d %s\n", len(shape.Untested), strings.Join(shape.Untested, ", "))
}
