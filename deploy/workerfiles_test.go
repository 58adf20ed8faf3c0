package deploy

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/ctxgraphd/ctxgraphd/fleet"
)

// The worker's files that nothing renders: the image recipe and the
// Kubernetes objects. Nothing here can be built or applied (no registry of
// images, no cluster), so the test holds them to what they must agree
// with: the Makefile's Claude Code version, go.mod's Go, the fleet's names,
// the worker's flags, and each other.

// workerFiles are the texts the checks read, by what they are.
type workerFiles struct {
	makefile, goMod, workerCmd, containerfile, deployment, scaledObject, readme string
}

func readWorkerFiles(t *testing.T) workerFiles {
	t.Helper()
	read := func(name string) string {
		b, err := os.ReadFile(filepath.FromSlash(name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	return workerFiles{
		makefile:      read("../Makefile"),
		goMod:         read("../go.mod"),
		workerCmd:     read("../cmd/ctxgraphd/worker.go"),
		containerfile: read("container/Containerfile"),
		deployment:    read("kubernetes/worker.yaml"),
		scaledObject:  read("kubernetes/scaledobject.yaml"),
		readme:        read("README.md"),
	}
}

// fleetProject is the project whose fleet the Kubernetes files name: the
// examples' project (its fleet name is its id, already lower case).
const fleetProject = "shop-4f1c2a9b7d3e"

// requiredWorkerFlags are the flags the Kubernetes files must give: the
// two the worker cannot start without, and --slots, which the scaling
// follows.
var requiredWorkerFlags = []string{"--nats", "--creds", "--slots"}

// workerFlagRE finds a flag in the worker command's source, as
// `cmd.Flags().StringVar(&url, "nats", …)`.
var workerFlagRE = regexp.MustCompile(`cmd\.Flags\(\)\.(\w+)Var\(&\w+, "([a-z-]+)"`)

// workerFlags are the flags of `ctxgraphd worker`, read from its source
// (a main package, which a test cannot import), and whether each takes a
// value.
func workerFlags(source string) map[string]bool {
	flags := map[string]bool{}
	for _, m := range workerFlagRE.FindAllStringSubmatch(source, -1) {
		flags["--"+m[2]] = m[1] != "Bool"
	}
	return flags
}

// kedaJetStreamFields are the metadata of KEDA's nats-jetstream trigger
// (keda.sh, scalers, NATS JetStream): any other key is a typo KEDA would
// ignore.
var kedaJetStreamFields = []string{"natsServerMonitoringEndpoint", "account", "stream", "consumer", "lagThreshold", "activationLagThreshold", "useHttps"}

// checkWorkerFiles returns every disagreement between the files, each
// naming the files and the fix.
func checkWorkerFiles(f workerFiles) []string {
	var problems []string
	fail := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }

	// The image recipe pins what the Makefile and go.mod pin.
	if make, img := makeVar(f.makefile, "CLAUDE_VERSION"), containerArg(f.containerfile, "CLAUDE_VERSION"); make == "" || make != img {
		fail("Containerfile's ARG CLAUDE_VERSION=%s, the Makefile's CLAUDE_VERSION := %s: the image must run the CLI the tests run; make them equal", img, make)
	}
	if make, img := makeVar(f.makefile, "SRT_VERSION"), containerArg(f.containerfile, "SRT_VERSION"); make == "" || make != img {
		fail("Containerfile's ARG SRT_VERSION=%s, the Makefile's SRT_VERSION := %s: the image must confine the setup with the runtime the tests run; make them equal", img, make)
	}
	if mod, img := goDirective(f.goMod), containerArg(f.containerfile, "GO_VERSION"); mod == "" || mod != img {
		fail("Containerfile's ARG GO_VERSION=%s, go.mod's go %s: build with go.mod's Go; make them equal", img, mod)
	}
	entry := containerInstruction(f.containerfile, "ENTRYPOINT")
	var entrypoint []string
	if err := json.Unmarshal([]byte(entry), &entrypoint); err != nil || !slices.Equal(entrypoint, []string{"ctxgraphd", "worker"}) {
		fail(`Containerfile's ENTRYPOINT %s: want ["ctxgraphd", "worker"], which the Deployment's args follow`, entry)
	}
	// What a lane's run needs beside the worker: git for the clones and
	// bundles, bubblewrap and socat for Claude Code's sandbox, ripgrep for
	// the sandbox runtime that confines the setup, Node.js and npm for the
	// CLI's install (and the projects that build with them).
	install := regexp.MustCompile(`apt-get install[^\n]*\\\n([^\n]*)`).FindStringSubmatch(f.containerfile)
	for _, pkg := range []string{"git", "bubblewrap", "socat", "ripgrep", "nodejs", "npm"} {
		if install == nil || !slices.Contains(strings.Fields(install[1]), pkg) {
			fail("Containerfile's apt-get install does not install %s: a worker's runs need it", pkg)
		}
	}
	uid, _, _ := strings.Cut(containerInstruction(f.containerfile, "USER"), ":")
	home := regexp.MustCompile(`--home-dir (\S+)`).FindStringSubmatch(f.containerfile)

	deployment, err := decodeDeployment(f.deployment)
	if err != nil {
		return append(problems, "kubernetes/worker.yaml: "+err.Error())
	}
	scaled, err := decodeScaledObject(f.scaledObject)
	if err != nil {
		return append(problems, "kubernetes/scaledobject.yaml: "+err.Error())
	}
	pod := deployment.Spec.Template.Spec
	if len(pod.Containers) != 1 {
		return append(problems, fmt.Sprintf("worker.yaml: %d containers, want the worker alone", len(pod.Containers)))
	}
	c := pod.Containers[0]

	// The image the Deployment runs is the one the docs build.
	for _, doc := range []struct{ name, text string }{{"README.md", f.readme}, {"Containerfile", f.containerfile}} {
		if !strings.Contains(doc.text, "-f deploy/container/Containerfile -t "+c.Image+" .") {
			fail("worker.yaml runs image %s, which %s's build command does not build (-t %s)", c.Image, doc.name, c.Image)
		}
	}

	// The args are the worker's flags, after the image's entrypoint.
	if len(c.Command) > 0 {
		fail("worker.yaml sets command %q, which replaces the image's entrypoint: give the worker's flags as args", c.Command)
	}
	flags := workerFlags(f.workerCmd)
	if len(flags) < len(requiredWorkerFlags) || !flags["--nats"] {
		return append(problems, fmt.Sprintf("cmd/ctxgraphd/worker.go: found flags %v, not the worker's: update workerFlagRE", flags))
	}
	args, err := parseWorkerArgs(c.Args, flags)
	if err != nil {
		fail("worker.yaml's args: %v", err)
	}
	slots, err := strconv.Atoi(args["--slots"])
	if err != nil || slots < 1 {
		fail("worker.yaml's --slots %q: want a number of lanes, 1 or more", args["--slots"])
	}
	mounts := map[string]volumeMount{}
	for _, m := range c.VolumeMounts {
		mounts[m.Name] = m
	}
	volumes := map[string]volume{}
	for _, v := range pod.Volumes {
		volumes[v.Name] = v
	}
	// --creds is a file of a Secret's volume; --dir a writable volume.
	credsFound := false
	for name, v := range volumes {
		m, mounted := mounts[name]
		if v.Secret == nil || !mounted {
			continue
		}
		for _, it := range v.Secret.Items {
			credsFound = credsFound || path.Join(m.MountPath, it.Path) == args["--creds"]
		}
	}
	if !credsFound {
		fail("worker.yaml's --creds %s is no file of a mounted Secret: mount the Secret of the credentials there", args["--creds"])
	}
	if dir := args["--dir"]; dir != "" && !underWritableMount(dir, mounts, volumes) {
		fail("worker.yaml's --dir %s is not on a writable volume, and the root file system is read-only", dir)
	}
	if home == nil || !underWritableMount(home[1], mounts, volumes) {
		fail("the image's home (%v) is not on a writable volume of worker.yaml: Claude Code writes ~/.claude", home)
	}

	// The image's user, and a sandbox bubblewrap can make.
	ctx, podCtx := c.SecurityContext, pod.SecurityContext
	if strconv.Itoa(podCtx.RunAsUser) != uid || !podCtx.RunAsNonRoot {
		fail("worker.yaml runs as uid %d (runAsNonRoot %t), the image's USER is %q: run as the image's unprivileged user", podCtx.RunAsUser, podCtx.RunAsNonRoot, uid)
	}
	if pod.HostUsers == nil || *pod.HostUsers {
		fail("worker.yaml: hostUsers must be false: the pod's own user namespace is what makes the unmasked /proc and the unconfined profiles safe")
	}
	if ctx.ProcMount != "Unmasked" {
		fail("worker.yaml: procMount %q: bubblewrap cannot mount the sandbox's /proc under a masked one; want Unmasked", ctx.ProcMount)
	}
	if podCtx.SeccompProfile.Type != "Unconfined" || podCtx.AppArmorProfile.Type != "Unconfined" {
		fail("worker.yaml: seccomp %q, AppArmor %q: the runtimes' default profiles refuse bubblewrap's unshare and mount; want Unconfined", podCtx.SeccompProfile.Type, podCtx.AppArmorProfile.Type)
	}
	if ctx.Privileged || ctx.AllowPrivilegeEscalation == nil || *ctx.AllowPrivilegeEscalation || !slices.Equal(ctx.Capabilities.Drop, []string{"ALL"}) {
		fail("worker.yaml: the worker needs no privilege (bubblewrap makes its namespaces without one): privileged false, allowPrivilegeEscalation false, capabilities drop ALL")
	}
	if len(c.EnvFrom) == 0 || c.EnvFrom[0].SecretRef.Name == "" {
		fail("worker.yaml: no Secret gives the workers their Claude login (envFrom secretRef)")
	}

	// KEDA scales this Deployment on this project's work queue.
	if scaled.APIVersion != "keda.sh/v1alpha1" || scaled.Kind != "ScaledObject" {
		fail("scaledobject.yaml is %s %s, want keda.sh/v1alpha1 ScaledObject", scaled.APIVersion, scaled.Kind)
	}
	if ref := scaled.Spec.ScaleTargetRef; ref.Name != deployment.Metadata.Name || (ref.Kind != "" && ref.Kind != "Deployment") {
		fail("scaledobject.yaml scales %s %q, want the Deployment %q", ref.Kind, ref.Name, deployment.Metadata.Name)
	}
	if len(scaled.Spec.Triggers) != 1 || scaled.Spec.Triggers[0].Type != "nats-jetstream" {
		return append(problems, "scaledobject.yaml: want one trigger, of type nats-jetstream")
	}
	meta := scaled.Spec.Triggers[0].Metadata
	for k := range meta {
		if !slices.Contains(kedaJetStreamFields, k) {
			fail("scaledobject.yaml: %q is no field of KEDA's nats-jetstream trigger (%s)", k, strings.Join(kedaJetStreamFields, ", "))
		}
	}
	names, err := fleet.NewSubjects(fleetProject)
	if err != nil {
		return append(problems, err.Error())
	}
	if meta["stream"] != names.LanesStream() || meta["consumer"] != names.LanesConsumer() {
		fail("scaledobject.yaml watches stream %q, consumer %q; project %s's work queue is stream %q, consumer %q (fleet.Subjects)",
			meta["stream"], meta["consumer"], fleetProject, names.LanesStream(), names.LanesConsumer())
	}
	if meta["lagThreshold"] != args["--slots"] {
		fail("scaledobject.yaml's lagThreshold %q, the workers' --slots %q: a pod runs --slots lanes, so one pod per that many; make them equal", meta["lagThreshold"], args["--slots"])
	}
	if meta["natsServerMonitoringEndpoint"] == "" {
		fail("scaledobject.yaml: no natsServerMonitoringEndpoint")
	}
	return problems
}

func TestWorkerFilesAgree(t *testing.T) {
	for _, p := range checkWorkerFiles(readWorkerFiles(t)) {
		t.Error(p)
	}
}

// TestWorkerFilesAgreeRefusesDrift: each check fails when one file drifts
// from the others, so that the test above holds for something.
func TestWorkerFilesAgreeRefusesDrift(t *testing.T) {
	honest := readWorkerFiles(t)
	tests := []struct {
		name  string
		drift func(*workerFiles) *string // the text to change
		from  string
		to    string
		want  string
	}{
		{"the Makefile's CLI", func(f *workerFiles) *string { return &f.makefile }, "CLAUDE_VERSION := ", "CLAUDE_VERSION := 9", "ARG CLAUDE_VERSION"},
		{"the image's CLI", func(f *workerFiles) *string { return &f.containerfile }, "ARG CLAUDE_VERSION=", "ARG CLAUDE_VERSION=9", "ARG CLAUDE_VERSION"},
		{"the image's sandbox runtime", func(f *workerFiles) *string { return &f.containerfile }, "ARG SRT_VERSION=", "ARG SRT_VERSION=9", "ARG SRT_VERSION"},
		{"the Makefile's sandbox runtime", func(f *workerFiles) *string { return &f.makefile }, "SRT_VERSION   := ", "SRT_VERSION   := 9", "ARG SRT_VERSION"},
		{"no runtime's ripgrep", func(f *workerFiles) *string { return &f.containerfile }, " ripgrep ", " ", "does not install ripgrep"},
		{"go.mod's Go", func(f *workerFiles) *string { return &f.goMod }, "\ngo ", "\ngo 9", "ARG GO_VERSION"},
		{"no sandbox", func(f *workerFiles) *string { return &f.containerfile }, " bubblewrap ", " ", "does not install bubblewrap"},
		{"the entrypoint", func(f *workerFiles) *string { return &f.containerfile }, `"worker"]`, `"run"]`, "ENTRYPOINT"},
		{"the image run", func(f *workerFiles) *string { return &f.deployment }, "ctxgraphd-worker:latest", "ctxgraphd-worker:other", "does not build"},
		{"a command", func(f *workerFiles) *string { return &f.deployment }, "          args:", "          command: [ctxgraphd, worker]\n          args:", "replaces the image's entrypoint"},
		{"a flag the worker renamed", func(f *workerFiles) *string { return &f.workerCmd }, `"dir"`, `"clones"`, `unknown flag "--dir"`},
		{"an unknown flag", func(f *workerFiles) *string { return &f.deployment }, "- --dir", "- --workdir", `unknown flag "--workdir"`},
		{"no credentials", func(f *workerFiles) *string { return &f.deployment }, "            - --creds\n            - /etc/ctxgraphd/worker.creds\n", "", `missing "--creds"`},
		{"credentials off the Secret", func(f *workerFiles) *string { return &f.deployment }, "- /etc/ctxgraphd/worker.creds", "- /home/ctxgraphd/worker.creds", "no file of a mounted Secret"},
		{"clones on the read-only root", func(f *workerFiles) *string { return &f.deployment }, "- /work\n", "- /srv/work\n", "not on a writable volume"},
		{"another user", func(f *workerFiles) *string { return &f.deployment }, "runAsUser: 10001", "runAsUser: 1000", "the image's USER"},
		{"host users", func(f *workerFiles) *string { return &f.deployment }, "hostUsers: false", "hostUsers: true", "hostUsers must be false"},
		{"a masked /proc", func(f *workerFiles) *string { return &f.deployment }, "procMount: Unmasked", "procMount: Default", "procMount"},
		{"the default seccomp", func(f *workerFiles) *string { return &f.deployment }, "seccompProfile:\n          type: Unconfined", "seccompProfile:\n          type: RuntimeDefault", "want Unconfined"},
		{"privileged", func(f *workerFiles) *string { return &f.deployment }, "allowPrivilegeEscalation: false", "allowPrivilegeEscalation: false\n            privileged: true", "needs no privilege"},
		{"a misspelt field", func(f *workerFiles) *string { return &f.deployment }, "hostUsers:", "hostUser:", "not found"},
		{"another stream", func(f *workerFiles) *string { return &f.scaledObject }, "stream: ctxgraphd_shop-4f1c2a9b7d3e_lanes", "stream: ctxgraphd_shop_lanes", "work queue is stream"},
		{"another consumer", func(f *workerFiles) *string { return &f.scaledObject }, "consumer: workers", "consumer: worker", "work queue is stream"},
		{"a guessed KEDA field", func(f *workerFiles) *string { return &f.scaledObject }, "lagThreshold:", "lag:", `"lag" is no field`},
		{"another threshold", func(f *workerFiles) *string { return &f.scaledObject }, `lagThreshold: "2"`, `lagThreshold: "5"`, "make them equal"},
		{"another target", func(f *workerFiles) *string { return &f.scaledObject }, "scaleTargetRef:\n    name: ctxgraphd-worker", "scaleTargetRef:\n    name: worker", "want the Deployment"},
		{"another scaler", func(f *workerFiles) *string { return &f.scaledObject }, "type: nats-jetstream", "type: stan", "nats-jetstream"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := honest
			text := tt.drift(&f)
			if !strings.Contains(*text, tt.from) {
				t.Fatalf("the files no longer hold %q: update this case", tt.from)
			}
			*text = strings.Replace(*text, tt.from, tt.to, 1)
			problems := checkWorkerFiles(f)
			if !slices.ContainsFunc(problems, func(p string) bool { return strings.Contains(p, tt.want) }) {
				t.Errorf("problems %q, want one containing %q", problems, tt.want)
			}
		})
	}
}

// The parts of the Kubernetes objects the checks read. Decoding is strict
// (a field the structs do not have is an error), so that a misspelt field,
// which the API server would drop or refuse, fails here.

type objectMeta struct {
	Name   string            `yaml:"name"`
	Labels map[string]string `yaml:"labels"`
}

type deploymentObject struct {
	APIVersion string     `yaml:"apiVersion"`
	Kind       string     `yaml:"kind"`
	Metadata   objectMeta `yaml:"metadata"`
	Spec       struct {
		Replicas int `yaml:"replicas"`
		Selector struct {
			MatchLabels map[string]string `yaml:"matchLabels"`
		} `yaml:"selector"`
		Template struct {
			Metadata objectMeta `yaml:"metadata"`
			Spec     podSpec    `yaml:"spec"`
		} `yaml:"template"`
	} `yaml:"spec"`
}

type podSpec struct {
	HostUsers                     *bool              `yaml:"hostUsers"`
	ShareProcessNamespace         bool               `yaml:"shareProcessNamespace"`
	TerminationGracePeriodSeconds int                `yaml:"terminationGracePeriodSeconds"`
	AutomountServiceAccountToken  *bool              `yaml:"automountServiceAccountToken"`
	SecurityContext               podSecurityContext `yaml:"securityContext"`
	Containers                    []container        `yaml:"containers"`
	Volumes                       []volume           `yaml:"volumes"`
}

type profile struct {
	Type string `yaml:"type"`
}

type podSecurityContext struct {
	RunAsNonRoot    bool    `yaml:"runAsNonRoot"`
	RunAsUser       int     `yaml:"runAsUser"`
	RunAsGroup      int     `yaml:"runAsGroup"`
	FSGroup         int     `yaml:"fsGroup"`
	SeccompProfile  profile `yaml:"seccompProfile"`
	AppArmorProfile profile `yaml:"appArmorProfile"`
}

type container struct {
	Name    string   `yaml:"name"`
	Image   string   `yaml:"image"`
	Command []string `yaml:"command"`
	Args    []string `yaml:"args"`
	EnvFrom []struct {
		SecretRef struct {
			Name string `yaml:"name"`
		} `yaml:"secretRef"`
	} `yaml:"envFrom"`
	Resources struct {
		Requests map[string]string `yaml:"requests"`
		Limits   map[string]string `yaml:"limits"`
	} `yaml:"resources"`
	SecurityContext struct {
		AllowPrivilegeEscalation *bool `yaml:"allowPrivilegeEscalation"`
		Privileged               bool  `yaml:"privileged"`
		Capabilities             struct {
			Drop []string `yaml:"drop"`
		} `yaml:"capabilities"`
		ProcMount              string `yaml:"procMount"`
		ReadOnlyRootFilesystem bool   `yaml:"readOnlyRootFilesystem"`
	} `yaml:"securityContext"`
	VolumeMounts []volumeMount `yaml:"volumeMounts"`
}

type volumeMount struct {
	Name      string `yaml:"name"`
	MountPath string `yaml:"mountPath"`
	ReadOnly  bool   `yaml:"readOnly"`
}

type volume struct {
	Name   string `yaml:"name"`
	Secret *struct {
		SecretName  string `yaml:"secretName"`
		DefaultMode int    `yaml:"defaultMode"`
		Items       []struct {
			Key  string `yaml:"key"`
			Path string `yaml:"path"`
		} `yaml:"items"`
	} `yaml:"secret"`
	EmptyDir *struct {
		SizeLimit string `yaml:"sizeLimit"`
	} `yaml:"emptyDir"`
}

type scaledObject struct {
	APIVersion string     `yaml:"apiVersion"`
	Kind       string     `yaml:"kind"`
	Metadata   objectMeta `yaml:"metadata"`
	Spec       struct {
		ScaleTargetRef struct {
			Name string `yaml:"name"`
			Kind string `yaml:"kind"`
		} `yaml:"scaleTargetRef"`
		MinReplicaCount int `yaml:"minReplicaCount"`
		MaxReplicaCount int `yaml:"maxReplicaCount"`
		PollingInterval int `yaml:"pollingInterval"`
		CooldownPeriod  int `yaml:"cooldownPeriod"`
		Triggers        []struct {
			Type     string            `yaml:"type"`
			Metadata map[string]string `yaml:"metadata"`
		} `yaml:"triggers"`
	} `yaml:"spec"`
}

func decodeDeployment(text string) (deploymentObject, error) {
	var d deploymentObject
	if err := decodeOne(text, &d); err != nil {
		return d, err
	}
	if d.APIVersion != "apps/v1" || d.Kind != "Deployment" {
		return d, fmt.Errorf("%s %s, want apps/v1 Deployment", d.APIVersion, d.Kind)
	}
	if d.Spec.Selector.MatchLabels == nil || !mapsSubset(d.Spec.Selector.MatchLabels, d.Spec.Template.Metadata.Labels) {
		return d, errors.New("the selector does not select the template's labels")
	}
	return d, nil
}

func decodeScaledObject(text string) (scaledObject, error) {
	var s scaledObject
	return s, decodeOne(text, &s)
}

// decodeOne decodes the one YAML document of text strictly into v.
func decodeOne(text string, v any) error {
	dec := yaml.NewDecoder(strings.NewReader(text))
	dec.KnownFields(true)
	if err := dec.Decode(v); err != nil {
		return err
	}
	var extra any
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return fmt.Errorf("want one YAML document (%v)", err)
	}
	return nil
}

func mapsSubset(sub, of map[string]string) bool {
	for k, v := range sub {
		if of[k] != v {
			return false
		}
	}
	return true
}

// parseWorkerArgs reads `ctxgraphd worker`'s flags, each "--flag value".
func parseWorkerArgs(args []string, flags map[string]bool) (map[string]string, error) {
	out := map[string]string{}
	for i := 0; i < len(args); i++ {
		takesValue, known := flags[args[i]]
		switch {
		case !known:
			return out, fmt.Errorf("unknown flag %q (the worker's are %s)", args[i], strings.Join(slices.Sorted(maps.Keys(flags)), ", "))
		case takesValue && i+1 == len(args):
			return out, fmt.Errorf("%s without its value", args[i])
		case takesValue:
			out[args[i]] = args[i+1]
			i++
		}
	}
	for _, f := range requiredWorkerFlags {
		if out[f] == "" {
			return out, fmt.Errorf("missing %q, without which the worker does not start", f)
		}
	}
	return out, nil
}

// underWritableMount says whether p lies on a volume mounted writable
// that is not a Secret's.
func underWritableMount(p string, mounts map[string]volumeMount, volumes map[string]volume) bool {
	for name, m := range mounts {
		if m.ReadOnly || volumes[name].Secret != nil {
			continue
		}
		if p == m.MountPath || strings.HasPrefix(p, strings.TrimSuffix(m.MountPath, "/")+"/") {
			return true
		}
	}
	return false
}

// makeVar is the value of a Makefile's `NAME := value` line.
func makeVar(makefile, name string) string {
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name) + `\s*:?=\s*(\S+)\s*$`).FindStringSubmatch(makefile)
	if m == nil {
		return ""
	}
	return m[1]
}

// goDirective is go.mod's go version.
func goDirective(goMod string) string {
	m := regexp.MustCompile(`(?m)^go (\S+)\s*$`).FindStringSubmatch(goMod)
	if m == nil {
		return ""
	}
	return m[1]
}

// containerArg is the default of a Containerfile's `ARG NAME=value`.
func containerArg(containerfile, name string) string {
	m := regexp.MustCompile(`(?m)^ARG ` + regexp.QuoteMeta(name) + `=(\S+)\s*$`).FindStringSubmatch(containerfile)
	if m == nil {
		return ""
	}
	return m[1]
}

// containerInstruction is the argument of a Containerfile's last
// instruction of that name (the one in force).
func containerInstruction(containerfile, instruction string) string {
	var last string
	for line := range strings.SplitSeq(containerfile, "\n") {
		if rest, ok := strings.CutPrefix(line, instruction+" "); ok {
			last = strings.TrimSpace(rest)
		}
	}
	return last
}
