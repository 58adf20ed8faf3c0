package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"regexp"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"
)

// nonConfigEnv are prefixes of CTXGRAPHD_ variables that are not
// configuration keys, and so are neither applied nor refused. Every other
// CTXGRAPHD_ variable must name a key: a misspelt one would otherwise be
// silently ignored, the mistake this package exists to catch.
//
//   - CTXGRAPHD_TEST_*: the test harness (CTXGRAPHD_TEST_CLAUDE, the path of
//     the Claude Code CLI for end-to-end tests; see docs/DEVELOPING.md).
var nonConfigEnv = []string{"CTXGRAPHD_TEST_"}

// parsed is one checked value from a layer.
type parsed struct {
	key   *key
	value any
}

// loadFile applies a YAML file's keys. A missing file is no layer at all.
func loadFile(c *Config, prov Provenance, layer, path string) []error {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return []error{fmt.Errorf("%s configuration file: %w", layer, err)}
	}
	values, errs := parseFile(path, data)
	for _, p := range values {
		p.key.set(c, p.value)
		prov[p.key.name] = Origin{Layer: layer, Detail: path}
	}
	return errs
}

// parseFile reads a configuration file's keys and checks their values. It
// goes on past a problem, so that one run reports all of them, in the
// file's order.
func parseFile(path string, data []byte) ([]parsed, []error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if err == io.EOF { // empty, or only comments
			return nil, nil
		}
		return nil, []error{yamlError(path, data, err)}
	}
	p := &fileParser{path: path, seen: map[string]int{}}
	if len(doc.Content) > 0 {
		root := resolve(doc.Content[0])
		switch {
		case isNull(root):
		case root.Kind == yaml.MappingNode:
			p.mapping(root, "")
		default:
			p.errorf(root.Line, "want a mapping of keys at the top level, such as agent: or gates:, found %s", describeNode(root))
		}
	}
	var extra yaml.Node
	switch err := dec.Decode(&extra); {
	case err == io.EOF:
	case err != nil:
		p.errs = append(p.errs, yamlError(path, data, err))
	default:
		p.errorf(extra.Line, "a second YAML document: the file holds one mapping of keys, remove the ---")
	}
	return p.values, p.errs
}

// fileParser walks one file's YAML tree.
type fileParser struct {
	path   string
	seen   map[string]int // key -> line it was first set on
	values []parsed
	errs   []error
}

func (p *fileParser) errorf(line int, format string, args ...any) {
	p.errs = append(p.errs, fmt.Errorf("%s:%d: %s", p.path, line, fmt.Sprintf(format, args...)))
}

// mapping walks the keys under prefix ("" at the top). A dotted YAML key
// such as `agent.timeout: 5m` is the same key as its nested form, since both
// flatten to one name.
func (p *fileParser) mapping(n *yaml.Node, prefix string) {
	for i := 0; i+1 < len(n.Content); i += 2 {
		kn, vn := n.Content[i], resolve(n.Content[i+1])
		if kn.Kind != yaml.ScalarNode {
			p.errorf(kn.Line, "want a key name, found %s", describeNode(kn))
			continue
		}
		name := kn.Value
		if prefix != "" {
			name = prefix + "." + name
		}
		if k := byName[name]; k != nil {
			p.value(k, kn, vn)
			continue
		}
		if sections[name] {
			switch {
			case isNull(vn): // an empty section, e.g. every entry commented out
			case vn.Kind == yaml.MappingNode:
				p.mapping(vn, name)
			default:
				p.errorf(vn.Line, "%s: want a mapping of keys (%s), found %s", name, strings.Join(sectionKeys(name), ", "), describeNode(vn))
			}
			continue
		}
		p.errorf(kn.Line, "%s", unknownKey(name))
	}
}

func (p *fileParser) value(k *key, kn, vn *yaml.Node) {
	if first, ok := p.seen[k.name]; ok {
		p.errorf(kn.Line, "%s is set twice (first on line %d); keep one", k.name, first)
		return
	}
	p.seen[k.name] = kn.Line
	if k.kind == kindList && (vn.Kind == yaml.SequenceNode || isNull(vn)) {
		var elems []string
		for _, e := range vn.Content {
			e = resolve(e)
			if e.Kind != yaml.ScalarNode {
				p.errorf(e.Line, "%s: want %s, found %s in the list", k.name, k.allowed(), describeNode(e))
				return
			}
			elems = append(elems, e.Value)
		}
		v, err := k.parseList(elems)
		if err != nil {
			p.errorf(vn.Line, "%s: %q is not allowed: want %s", k.name, strings.Join(elems, ", "), k.allowed())
			return
		}
		p.values = append(p.values, parsed{key: k, value: v})
		return
	}
	if vn.Kind != yaml.ScalarNode {
		p.errorf(vn.Line, "%s: want a single value, %s, found %s", k.name, k.allowed(), describeNode(vn))
		return
	}
	raw := vn.Value
	if isNull(vn) { // `model:` or `model: ~`
		raw = ""
	}
	v, err := k.parse(raw)
	if err != nil {
		p.errorf(vn.Line, "%s: %q is not allowed: want %s", k.name, raw, k.allowed())
		return
	}
	p.values = append(p.values, parsed{key: k, value: v})
}

// resolve follows YAML aliases (*name) to the node they stand for.
func resolve(n *yaml.Node) *yaml.Node {
	for i := 0; n.Kind == yaml.AliasNode && n.Alias != nil && i < 100; i++ {
		n = n.Alias
	}
	return n
}

func isNull(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null"
}

func describeNode(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		return fmt.Sprintf("the value %q", n.Value)
	}
	return "something else"
}

// yamlLine picks the line out of yaml.v3's syntax errors ("yaml: line 3:
// ..."); it leaves the line out of some, and then so do we.
var yamlLine = regexp.MustCompile(`^line (\d+): (.*)$`)

func yamlError(path string, data []byte, err error) error {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	m := yamlLine.FindStringSubmatch(msg)
	if m == nil {
		return fmt.Errorf("%s: invalid YAML: %s", path, msg)
	}
	if strings.Contains(m[2], "cannot start any token") && bytes.Contains(data, []byte("\t")) {
		// By far the commonest cause, and the message does not say it.
		m[2] += " (YAML indents with spaces; this file has a tab)"
	}
	return fmt.Errorf("%s:%s: invalid YAML: %s", path, m[1], m[2])
}

// applyEnv applies CTXGRAPHD_* variables. As with exec.Cmd, the last
// assignment of a name wins.
func applyEnv(c *Config, prov Provenance, env []string) []error {
	vars := map[string]string{}
	for _, kv := range env {
		name, val, ok := strings.Cut(kv, "=")
		if !ok || !strings.HasPrefix(name, envPrefix) || nonConfig(name) {
			continue
		}
		vars[name] = val
	}
	var errs []error
	for _, name := range sortedKeys(vars) {
		val := vars[name]
		k := byEnv[name]
		if k == nil {
			errs = append(errs, fmt.Errorf("%s: %s", name, unknownEnv(name)))
			continue
		}
		v, err := k.parse(val)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s=%q: %s must be %s", name, val, k.name, k.allowed()))
			continue
		}
		k.set(c, v)
		prov[k.name] = Origin{Layer: LayerEnv, Detail: name}
	}
	return errs
}

func nonConfig(name string) bool {
	return slices.ContainsFunc(nonConfigEnv, func(p string) bool { return strings.HasPrefix(name, p) })
}

// applyFlags applies dotted keys given on the command line (run --set).
func applyFlags(c *Config, prov Provenance, flags map[string]string) []error {
	var errs []error
	for _, name := range sortedKeys(flags) {
		val := flags[name]
		k := byName[name]
		if k == nil {
			errs = append(errs, fmt.Errorf("--set %s: %s", name, unknownKey(name)))
			continue
		}
		v, err := k.parse(val)
		if err != nil {
			errs = append(errs, fmt.Errorf("--set %s=%q: %s must be %s", name, val, k.name, k.allowed()))
			continue
		}
		k.set(c, v)
		prov[k.name] = Origin{Layer: LayerFlag, Detail: "--set " + name}
	}
	return errs
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
