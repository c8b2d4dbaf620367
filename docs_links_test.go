package redlock

import (
	"fmt"
	"go/parser"
	"go/token"
	"io/fs"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode"

	"github.com/redlock-go/redlock/internal/redistest"
)

// Every relative link in every Markdown file of the repository (README.md,
// CHANGELOG.md, docs/, examples/, bench/, ...) names a file or directory
// that exists, and a #fragment names a heading (or an HTML anchor) of the
// Markdown file it points into, by GitHub's rules for heading anchors.
// External links (http, https, mailto) are not fetched: CI has no internet.
func TestMarkdownLinks(t *testing.T) {
	files, err := markdownFiles(".")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(files, "README.md") {
		t.Fatalf("found no README.md among the Markdown files %v: the test must run in the repository's root", files)
	}
	for _, problem := range checkMarkdownLinks(".", files) {
		t.Error(problem)
	}
}

// The checker itself, on Markdown written for it: it must report each broken
// link once, with its file and line, and nothing else.
func TestMarkdownLinkChecker(t *testing.T) {
	root := t.TempDir()
	write := func(name, text string) {
		t.Helper()
		p := filepath.Join(root, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("README.md", strings.Join([]string{
		"# Title",
		"",
		"See [the guide](docs/guide.md), [its part](docs/guide.md#part-2-the-end),",
		"[a directory](docs/) and [code](main.go#L3), [the root](/docs/guide.md).",
		"Broken: [gone](docs/gone.md) and [bad part](docs/guide.md#nope).",
		"![missing image](img/x.png), [Here](#title), [there](#missing-here).",
		"[web](https://example.com/nowhere), <https://example.com/x>, [mail](mailto:a@example.com).",
		"A link in code is text: `[x](nowhere.md)`, and a span across",
		"lines too: `go get [y](nowhere2.md)",
		"[z](nowhere3.md)` ends here.",
		"",
		"```md",
		"[in a fence](nowhere4.md)",
		"```",
		"",
		"[ref]: docs/missing-ref.md",
		`<a href="docs/missing-href.md">html</a> [escaped %](docs/a%20b.md)`,
		"[outside](../elsewhere.md)",
	}, "\n"))
	write("main.go", "package main\n")
	write("docs/a b.md", "text\n")
	write("docs/guide.md", strings.Join([]string{
		"# Guide",
		"## Part 2: the end",
		"## `Code` and [a link](../README.md) (in a heading)",
		"## Twice",
		"## Twice",
		"Setext heading",
		"--------------",
		`<a name="kept"></a>`,
		"",
		"[a](#code-and-a-link-in-a-heading) [b](#twice-1) [c](#setext-heading) [d](#kept) [e](#twice-2)",
		"[f](../README.md#title) [g](guide.md#part-2-the-end)",
		"",
		"    [indented code is not told apart](nowhere5.md)",
	}, "\n"))
	files, err := markdownFiles(root)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"README.md", "docs/a b.md", "docs/guide.md"}; !slices.Equal(files, want) {
		t.Fatalf("files %v, want %v", files, want)
	}
	got := checkMarkdownLinks(root, files)
	want := []string{
		`README.md:5: link "docs/gone.md": docs/gone.md does not exist`,
		`README.md:5: link "docs/guide.md#nope": docs/guide.md has no heading or anchor "nope"`,
		`README.md:6: link "img/x.png": img/x.png does not exist`,
		`README.md:6: link "#missing-here": README.md has no heading or anchor "missing-here"`,
		`README.md:16: link "docs/missing-ref.md": docs/missing-ref.md does not exist`,
		`README.md:17: link "docs/missing-href.md": docs/missing-href.md does not exist`,
		`README.md:18: link "../elsewhere.md": it leaves the repository`,
		`docs/guide.md:10: link "#twice-2": docs/guide.md has no heading or anchor "twice-2"`,
		`docs/guide.md:13: link "nowhere5.md": docs/nowhere5.md does not exist`,
	}
	if !slices.Equal(got, want) {
		t.Errorf("problems:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// The README's quick start is a whole program that builds against this
// module's API (the README promises it runs once the addresses are yours).
func TestReadmeExampleBuilds(t *testing.T) {
	b, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	src, ok := quickStart(string(b))
	if !ok {
		t.Fatal("README.md has no ```go block that starts with package main under a heading \"Quick start\"")
	}
	gocmd, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command, which builds the README's quick start: %v", err)
	}
	dir := t.TempDir()
	main := filepath.Join(dir, "main.go")
	if err := os.WriteFile(main, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	// Built from the module's root, the program's imports resolve to this
	// checkout and the versions go.mod requires.
	cmd := exec.Command(gocmd, "build", "-o", filepath.Join(dir, "quickstart"), main)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("the README's quick start does not build: %v\n%s", err, out)
	}
}

// TestReadmeQuickStartExplainsTheWait runs the README's quick start, as
// a newcomer would, against three redis-server processes started just
// before: the restart guard refuses locks for a minute, and the program
// says so at once instead of sitting silent (issue 49, "the first minute,
// silent"). It is stopped once it has spoken.
func TestReadmeQuickStartExplainsTheWait(t *testing.T) {
	b, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	src, ok := quickStart(string(b))
	if !ok {
		t.Fatal("README.md has no quick start")
	}
	const addrs = `"10.0.0.1:6379", "10.0.0.2:6379", "10.0.0.3:6379"`
	if !strings.Contains(src, addrs) {
		t.Fatalf("the quick start no longer lists its nodes as %s: update this test", addrs)
	}
	servers := redistest.Start(t, 3)
	local := make([]string, len(servers))
	for i, s := range servers {
		local[i] = strconv.Quote(s.Addr())
	}
	src = strings.Replace(src, addrs, strings.Join(local, ", "), 1)
	dir := t.TempDir()
	main := filepath.Join(dir, "main.go")
	if err := os.WriteFile(main, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "quickstart")
	if out, err := exec.Command("go", "build", "-o", bin, main).CombinedOutput(); err != nil {
		t.Fatalf("the quick start does not build: %v\n%s", err, out)
	}
	cmd := exec.Command(bin)
	var out syncBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(done)
	}()
	defer func() {
		_ = cmd.Process.Kill()
		<-done
	}()
	// It waits a minute for the nodes; it must say why well before.
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(out.String(), "recovering") {
		select {
		case <-done:
			t.Fatalf("the quick start ended without a word of the restart guard:\n%s", out.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("the quick start said nothing of the restart guard for 20 s of its minute's wait:\n%s", out.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("the quick start said:\n%s", out.String())
}

// go doc's package overview shows the README's quick start: every line of
// code under doc.go's "# Use" heading, but "...", is a line of it.
func TestPackageDocExampleIsReadmes(t *testing.T) {
	b, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	src, ok := quickStart(string(b))
	if !ok {
		t.Fatal("README.md has no quick start")
	}
	readme := map[string]bool{}
	for _, l := range strings.Split(src, "\n") {
		readme[strings.TrimSpace(l)] = true
	}
	f, err := parser.ParseFile(token.NewFileSet(), "doc.go", nil, parser.ParseComments|parser.PackageClauseOnly)
	if err != nil {
		t.Fatal(err)
	}
	_, use, ok := strings.Cut(f.Doc.Text(), "\n# Use\n")
	if !ok {
		t.Fatal(`doc.go's package comment has no "# Use" heading`)
	}
	use, _, _ = strings.Cut(use, "\n# ")
	code := 0
	for _, l := range strings.Split(use, "\n") {
		if !strings.HasPrefix(l, "\t") || strings.TrimSpace(l) == "..." {
			continue
		}
		code++
		if !readme[strings.TrimSpace(l)] {
			t.Errorf("doc.go's overview shows %q, which the README's quick start does not have", strings.TrimSpace(l))
		}
	}
	if code == 0 {
		t.Error(`doc.go's "# Use" section shows no code`)
	}
}

// quickStart returns the first ```go block after the heading "Quick start"
// if it is a whole program (package main).
func quickStart(readme string) (string, bool) {
	_, after, ok := strings.Cut(readme, "\n## Quick start\n")
	if !ok {
		return "", false
	}
	_, after, ok = strings.Cut(after, "```go\n")
	if !ok {
		return "", false
	}
	src, _, ok := strings.Cut(after, "\n```")
	return src + "\n", ok && strings.HasPrefix(src, "package main\n")
}

// markdownFiles returns the Markdown files under root, slash-separated and
// relative to it, sorted; directories whose names begin with a dot (.git)
// are left out.
func markdownFiles(root string) ([]string, error) {
	var files []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && p != root && strings.HasPrefix(d.Name(), ".") {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(d.Name(), ".md") {
			rel, err := filepath.Rel(root, p)
			if err != nil {
				return err
			}
			files = append(files, filepath.ToSlash(rel))
		}
		return nil
	})
	slices.Sort(files)
	return files, err
}

// checkMarkdownLinks returns a line "file:line: link "target": what is wrong"
// for each broken relative link in files (slash-separated, relative to root).
func checkMarkdownLinks(root string, files []string) []string {
	anchors := map[string]map[string]bool{} // Markdown file -> its anchors, read once
	anchorsOf := func(file string) (map[string]bool, error) {
		if a, ok := anchors[file]; ok {
			return a, nil
		}
		b, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(file)))
		if err != nil {
			return nil, err
		}
		a := markdownAnchors(string(b))
		anchors[file] = a
		return a, nil
	}
	var problems []string
	for _, file := range files {
		b, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(file)))
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s: %v", file, err))
			continue
		}
		for _, l := range markdownLinks(string(b)) {
			if msg := checkLink(root, file, l.target, anchorsOf); msg != "" {
				problems = append(problems, fmt.Sprintf("%s:%d: link %q: %s", file, l.line, l.target, msg))
			}
		}
	}
	return problems
}

// checkLink says what is wrong with one link of file, or "".
func checkLink(root, file, target string, anchorsOf func(string) (map[string]bool, error)) string {
	if isExternal(target) {
		return ""
	}
	p, frag, _ := strings.Cut(target, "#")
	p, _, _ = strings.Cut(p, "?")
	if up, err := url.PathUnescape(p); err == nil {
		p = up
	}
	if f, err := url.PathUnescape(frag); err == nil {
		frag = f
	}
	dest := file // a bare #fragment is in the file itself
	if p != "" {
		if strings.HasPrefix(p, "/") { // GitHub resolves /x from the repository's root
			dest = pathClean(p[1:])
		} else {
			dest = pathClean(pathJoin(pathDir(file), p))
		}
		if dest == ".." || strings.HasPrefix(dest, "../") {
			return "it leaves the repository"
		}
		if _, err := os.Stat(filepath.Join(root, filepath.FromSlash(dest))); err != nil {
			return dest + " does not exist"
		}
	}
	if frag == "" || !strings.HasSuffix(dest, ".md") {
		return "" // a line of a source file (#L12) is not checked
	}
	a, err := anchorsOf(dest)
	if err != nil {
		return err.Error()
	}
	if !a[frag] {
		return fmt.Sprintf("%s has no heading or anchor %q", dest, frag)
	}
	return ""
}

var scheme = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.-]*:`)

func isExternal(target string) bool {
	return scheme.MatchString(target) || strings.HasPrefix(target, "//")
}

func pathClean(p string) string     { return filepath.ToSlash(filepath.Clean(filepath.FromSlash(p))) }
func pathJoin(a, b string) string   { return a + "/" + b }
func pathDir(file string) string    { return filepath.ToSlash(filepath.Dir(filepath.FromSlash(file))) }
func isBlank(line string) bool      { return strings.TrimSpace(line) == "" }
func indentOf(line string) int      { return len(line) - len(strings.TrimLeft(line, " ")) }
func lineAt(text string, i int) int { return 1 + strings.Count(text[:i], "\n") }

type mdLink struct {
	line   int
	target string
}

var (
	// An inline link or image: the target follows "](", up to a space (a
	// title follows) or the closing parenthesis; <target> is allowed.
	inlineLink = regexp.MustCompile(`\]\(\s*(<[^>\n]*>|[^\s()]*(?:\([^\s()]*\)[^\s()]*)*)`)
	// A reference definition: [label]: target.
	refDef = regexp.MustCompile(`(?m)^ {0,3}\[[^\]\n]+\]:[ \t]*(<[^>\n]*>|\S+)`)
	// An HTML link or image.
	htmlRef = regexp.MustCompile(`(?i)<(?:a|img)\b[^>]*?\b(?:href|src)\s*=\s*"([^"]*)"`)
)

// markdownLinks returns the link targets of a Markdown text with their
// lines, outside fenced code blocks and code spans. Indented code blocks
// are not told apart from the indented lines of a list item, and are read
// as text.
func markdownLinks(text string) []mdLink {
	var links []mdLink
	for _, blk := range textBlocks(text) {
		body := blankCodeSpans(blk.text)
		add := func(i int, target string) {
			target = strings.TrimSuffix(strings.TrimPrefix(target, "<"), ">")
			if target != "" {
				links = append(links, mdLink{blk.line + lineAt(body, i) - 1, target})
			}
		}
		for _, re := range []*regexp.Regexp{inlineLink, refDef, htmlRef} {
			for _, m := range re.FindAllStringSubmatchIndex(body, -1) {
				add(m[2], body[m[2]:m[3]])
			}
		}
	}
	slices.SortStableFunc(links, func(a, b mdLink) int { return a.line - b.line })
	return links
}

type textBlock struct {
	line int // of the block's first line
	text string
}

// textBlocks splits a Markdown text into its paragraphs (runs of lines
// between blank lines), without fenced code blocks.
func textBlocks(text string) []textBlock {
	var blocks []textBlock
	var cur []string
	start := 0
	flush := func() {
		if len(cur) > 0 {
			blocks = append(blocks, textBlock{start, strings.Join(cur, "\n")})
		}
		cur = nil
	}
	fence := ""
	for i, line := range strings.Split(text, "\n") {
		if fence != "" {
			if t := strings.TrimSpace(line); strings.HasPrefix(t, fence) && strings.Trim(t, fence[:1]) == "" && indentOf(line) < 4 {
				fence = ""
			}
			continue
		}
		if f := openingFence(line); f != "" {
			flush()
			fence = f
			continue
		}
		if isBlank(line) {
			flush()
			continue
		}
		if len(cur) == 0 {
			start = i + 1
		}
		cur = append(cur, line)
	}
	flush()
	return blocks
}

// openingFence returns the backticks or tildes that open a fenced code block
// on line, or "".
func openingFence(line string) string {
	if indentOf(line) >= 4 {
		return ""
	}
	t := strings.TrimLeft(line, " ")
	for _, c := range []string{"`", "~"} {
		n := len(t) - len(strings.TrimLeft(t, c))
		if n >= 3 && !(c == "`" && strings.Contains(t[n:], "`")) {
			return strings.Repeat(c, n)
		}
	}
	return ""
}

// blankCodeSpans replaces the code spans of a paragraph, backticks
// included, with spaces (newlines kept, so that offsets keep their lines).
// A run of backticks that no run of the same length closes is text.
func blankCodeSpans(s string) string {
	b := []byte(s)
	for i := 0; i < len(b); {
		if b[i] != '`' {
			i++
			continue
		}
		n := 0
		for i+n < len(b) && b[i+n] == '`' {
			n++
		}
		end := -1
		for j := i + n; j < len(b); {
			if b[j] != '`' {
				j++
				continue
			}
			m := 0
			for j+m < len(b) && b[j+m] == '`' {
				m++
			}
			if m == n {
				end = j + m
				break
			}
			j += m
		}
		if end < 0 {
			i += n
			continue
		}
		for k := i; k < end; k++ {
			if b[k] != '\n' {
				b[k] = ' '
			}
		}
		i = end
	}
	return string(b)
}

var (
	atxHeading   = regexp.MustCompile(`^ {0,3}#{1,6}(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$`)
	setextLine   = regexp.MustCompile(`^ {0,3}(?:=+|-+)[ \t]*$`)
	htmlAnchor   = regexp.MustCompile(`(?i)<[a-z][a-z0-9]*\b[^>]*?\b(?:name|id)\s*=\s*"([^"]+)"`)
	headingLink  = regexp.MustCompile(`!?\[([^\]]*)\]\([^)]*\)`)
	htmlTag      = regexp.MustCompile(`<[^>]+>`)
	listOrQuote  = regexp.MustCompile(`^ {0,3}(?:[-*+>]|\d+[.)])(?:[ \t]|$)`)
	tableOrBreak = regexp.MustCompile(`^ {0,3}(?:\||[-*_][ \t]*[-*_][ \t]*[-*_])`)
)

// markdownAnchors returns the fragments a Markdown file answers to on
// GitHub: each heading's slug (duplicates numbered -1, -2, ...) and the
// name or id of an HTML element.
func markdownAnchors(text string) map[string]bool {
	anchors := map[string]bool{}
	seen := map[string]int{}
	addHeading := func(h string) {
		s := githubSlug(h)
		if n, dup := seen[s]; dup {
			seen[s] = n + 1
			anchors[fmt.Sprintf("%s-%d", s, n+1)] = true
			return
		}
		seen[s] = 0
		anchors[s] = true
	}
	fence := ""
	prev := "" // the previous line, if it can be a setext heading's text
	for _, line := range strings.Split(text, "\n") {
		if fence != "" {
			if t := strings.TrimSpace(line); strings.HasPrefix(t, fence) && strings.Trim(t, fence[:1]) == "" {
				fence = ""
			}
			continue
		}
		if f := openingFence(line); f != "" {
			fence, prev = f, ""
			continue
		}
		for _, m := range htmlAnchor.FindAllStringSubmatch(line, -1) {
			anchors[m[1]] = true
		}
		switch {
		case atxHeading.MatchString(line):
			addHeading(atxHeading.FindStringSubmatch(line)[1])
			prev = ""
		case prev != "" && setextLine.MatchString(line):
			addHeading(prev)
			prev = ""
		case isBlank(line) || indentOf(line) >= 4 || listOrQuote.MatchString(line) || tableOrBreak.MatchString(line):
			prev = ""
		default:
			prev = strings.TrimSpace(line)
		}
	}
	return anchors
}

// githubSlug is GitHub's anchor of a heading: its text as rendered (links
// and images by their text, no code backticks or HTML tags), lowercased,
// without punctuation other than hyphens and underscores, each space a
// hyphen.
func githubSlug(heading string) string {
	h := headingLink.ReplaceAllString(heading, "$1")
	h = htmlTag.ReplaceAllString(h, "")
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(h)) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.Is(unicode.Mn, r):
			b.WriteRune(r)
		}
	}
	return b.String()
}
