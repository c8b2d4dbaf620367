// Command robustcheck checks a saved history of the robustness suite again
// (tests/robust, docs/fault-testing.md): the overlaps of the lock's holds,
// token inversions, stale writes accepted and lost updates, and porcupine's
// linearizability check of the fenced store. On a linearizability violation
// it writes porcupine's visualization to an HTML file.
//
// Usage:
//
//	go run ./cmd/robustcheck [-html out.html] [-timeout 1m] [-timeline] history.jsonl
//
// It exits 1 when the history shows a violation, 2 on bad input.
package main

import (
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/redlock-go/redlock/tests/robust/history"
)

func main() {
	html := flag.String("html", "", "write porcupine's visualization here on a violation (default: the history's name with .html)")
	timeout := flag.Duration("timeout", time.Minute, "bound on porcupine's search (0: none)")
	timeline := flag.Bool("timeline", false, "print the history as a timeline, in milliseconds from its first event")
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: robustcheck [-html out.html] [-timeout 1m] [-timeline] history.jsonl")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() != 1 {
		flag.Usage()
		os.Exit(2)
	}
	path := flag.Arg(0)
	events, err := history.Load(path)
	if err != nil {
		fmt.Fprintln(os.Stderr, "robustcheck:", err)
		os.Exit(2)
	}
	if *timeline {
		history.Timeline(os.Stdout, events)
	}
	out := *html
	if out == "" {
		out = path + ".html"
	}
	r, err := history.Check(events, *timeout, out)
	if err != nil {
		fmt.Fprintln(os.Stderr, "robustcheck:", err)
		os.Exit(2)
	}
	fmt.Println(history.Header)
	fmt.Println(r.Row())
	if r.Violations() {
		if r.Linearizable == "Illegal" {
			fmt.Println("porcupine's visualization:", out)
		}
		os.Exit(1)
	}
}
