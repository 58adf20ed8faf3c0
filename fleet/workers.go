package fleet

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nkeys"
)

// A worker's credentials are a file the daemon writes in its state dir
// (<Dir>/workers/NAME.creds, 0600) and a person copies to the worker's
// machine: an NKey user seed, with the project and the worker's name on
// comment lines above it.
//
// Why an NKey seed and not a NATS .creds file (a user JWT and its seed):
// a JWT is signed by an account of an operator, which would make the
// daemon an operator with its signing keys and an account resolver, and
// put each worker's permissions in a token that outlives the daemon's
// decision until revoked on its own. With NKey users the server's
// configuration is the one place a worker's permissions live (built from
// subjects.go), revoking is removing the user, and nats.go loads the file
// as it is (nats.NkeyOptionFromSeed, which reads the seed line and skips
// the comments), as the nats CLI does (--nkey FILE).

const credsExt = ".creds"

// The kinds of the errors of AddWorker and RevokeWorker (errors.Is), for
// a caller that answers each its own way: the control API's 400, 409 and
// 404. The errors' messages say more.
var (
	ErrBadName       = errors.New("fleet: name not allowed")
	ErrWorkerExists  = errors.New("fleet: worker exists")
	ErrUnknownWorker = errors.New("fleet: no such worker")
)

// kindError is an error of one of those kinds, with a message of its own.
type kindError struct {
	kind error
	msg  string
}

func (e *kindError) Error() string        { return e.msg }
func (e *kindError) Is(target error) bool { return target == e.kind }

// Worker is a worker the daemon issued credentials to.
type Worker struct {
	Name      string
	PublicKey string // the worker's NKey user, as the server knows it
	Path      string // its credentials file
}

// AddWorker issues credentials to a new worker, makes its results bucket
// and lets it connect, without a restart. It returns the worker; its
// credentials file is the worker's to load (LoadCredentials).
func (s *Server) AddWorker(ctx context.Context, name string) (Worker, error) {
	if err := checkName("worker", name); err != nil {
		return Worker{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	kp, err := nkeys.CreateUser()
	if err != nil {
		return Worker{}, fmt.Errorf("fleet: worker %s's key: %w", name, err)
	}
	defer kp.Wipe()
	seed, err := kp.Seed()
	if err != nil {
		return Worker{}, fmt.Errorf("fleet: worker %s's key: %w", name, err)
	}
	pub, err := kp.PublicKey()
	if err != nil {
		return Worker{}, fmt.Errorf("fleet: worker %s's key: %w", name, err)
	}
	path := filepath.Join(workersDir(s.dir), name+credsExt)
	if err := writeNew(path, credentialsFile(s.subjects.project, name, seed)); errors.Is(err, fs.ErrExist) {
		return Worker{}, &kindError{kind: ErrWorkerExists, msg: fmt.Sprintf("fleet: worker %q exists: revoke it first to issue new credentials, or pick another name", name)}
	} else if err != nil {
		return Worker{}, fmt.Errorf("fleet: worker %s: %w", name, err)
	}
	err = s.resultsBucket(ctx, name)
	if err == nil {
		err = s.reload()
	}
	if err != nil {
		os.Remove(path)
		return Worker{}, fmt.Errorf("fleet: worker %s: %w", name, err)
	}
	return Worker{Name: name, PublicKey: pub, Path: path}, nil
}

// writeNew writes a file that must not exist yet, mode 0600, whole or not
// at all: a crash leaves no half-written credentials, which would stop
// every later reload. The temporary name is not a worker's (a leading
// dot), and a link fails with fs.ErrExist where a rename would replace.
func writeNew(path string, data []byte) error {
	tmp := filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".new")
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return err
	}
	defer os.Remove(tmp)
	f, err := os.Open(tmp)
	if err != nil {
		return err
	}
	err = f.Sync()
	f.Close()
	if err != nil {
		return err
	}
	return os.Link(tmp, path)
}

// RevokeWorker revokes a worker whole: its credentials and user go (the
// server closes its connections at once, and the credentials connect no
// more, across restarts: the file is what makes the user), then its
// results bucket, with every object it put there (it can make nothing
// else: no consumer, no stream), and those OnRevoke registered are told,
// so that its attempts in flight are given to another worker and nothing
// it sent before is taken.
func (s *Server) RevokeWorker(name string) error {
	if err := checkName("worker", name); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	path := filepath.Join(workersDir(s.dir), name+credsExt)
	if err := os.Remove(path); errors.Is(err, fs.ErrNotExist) {
		return &kindError{kind: ErrUnknownWorker, msg: fmt.Sprintf("fleet: no worker %q: the workers are those Workers lists", name)}
	} else if err != nil {
		return fmt.Errorf("fleet: %w", err)
	}
	if err := s.reload(); err != nil {
		return err
	}
	for _, f := range s.revoked {
		f(name)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// Its pulls on the work queue are the daemon's, made for it: those
	// waiting put back what they take (OnRevoke's Executor.Revoked).
	if err := s.js.DeleteObjectStore(ctx, s.subjects.ResultsBucket(name)); err != nil && !errors.Is(err, jetstream.ErrStreamNotFound) && !errors.Is(err, jetstream.ErrBucketNotFound) {
		return fmt.Errorf("fleet: worker %s is cut off, but its results bucket stays: %w", name, err)
	}
	return nil
}

// Workers lists the workers with credentials, by name.
func (s *Server) Workers() ([]Worker, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.workers()
}

// workers lists the workers; the caller holds s.mu, or is Start.
func (s *Server) workers() ([]Worker, error) {
	names, err := s.workerNames()
	if err != nil {
		return nil, err
	}
	out := make([]Worker, 0, len(names))
	for _, name := range names {
		path := filepath.Join(workersDir(s.dir), name+credsExt)
		c, err := LoadCredentials(path)
		if err != nil {
			return nil, err
		}
		if c.Worker != name || c.Project != s.subjects.project {
			return nil, fmt.Errorf("fleet: credentials %s are worker %s's of project %s, not %s's of %s: the file was moved; revoke the worker and add it again", path, c.Worker, c.Project, name, s.subjects.project)
		}
		out = append(out, Worker{Name: name, PublicKey: c.PublicKey, Path: path})
	}
	return out, nil
}

// workerNames are the names of the credentials files, sorted.
func (s *Server) workerNames() ([]string, error) {
	entries, err := os.ReadDir(workersDir(s.dir))
	if err != nil {
		return nil, fmt.Errorf("fleet: %w", err)
	}
	var names []string
	for _, e := range entries {
		if name, ok := strings.CutSuffix(e.Name(), credsExt); ok && e.Type().IsRegular() && checkName("worker", name) == nil {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return names, nil
}

// credentialsFile is the text of a worker's credentials file.
func credentialsFile(project, worker string, seed []byte) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "# ctxgraphd worker credentials: keep this file secret; whoever holds it is this worker.\n")
	fmt.Fprintf(&b, "# Revoking the worker on the daemon makes it worthless (docs/operations.md, workers over NATS).\n")
	fmt.Fprintf(&b, "%s%s\n%s%s\n", projectLine, project, workerLine, worker)
	b.Write(seed)
	b.WriteByte('\n')
	return b.Bytes()
}

const (
	projectLine = "# project: "
	workerLine  = "# worker: "
)

// Credentials are a worker's, as read from its file.
type Credentials struct {
	Project   string
	Worker    string
	PublicKey string
	path      string
}

// LoadCredentials reads a worker's credentials file.
func LoadCredentials(path string) (Credentials, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Credentials{}, fmt.Errorf("fleet: credentials: %w", err)
	}
	c := Credentials{path: path}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		line := sc.Text()
		if v, ok := strings.CutPrefix(line, projectLine); ok {
			c.Project = v
		}
		if v, ok := strings.CutPrefix(line, workerLine); ok {
			c.Worker = v
		}
	}
	for _, l := range []struct{ line, value string }{{projectLine, c.Project}, {workerLine, c.Worker}} {
		if !nameRE.MatchString(l.value) {
			return Credentials{}, fmt.Errorf("fleet: credentials %s: want a line %q with a name of lower-case letters, digits and '-', found %q: use the file the daemon wrote", path, l.line+"NAME", l.value)
		}
	}
	kp, err := nkeys.ParseDecoratedUserNKey(data)
	if err != nil {
		return Credentials{}, fmt.Errorf("fleet: credentials %s: no NKey user seed: %w", path, err)
	}
	defer kp.Wipe()
	if c.PublicKey, err = kp.PublicKey(); err != nil {
		return Credentials{}, fmt.Errorf("fleet: credentials %s: %w", path, err)
	}
	return c, nil
}

// Options are the connection options of the worker: its NKey, and the
// inbox it may receive replies on (the server refuses it any other).
func (c Credentials) Options() ([]nats.Option, error) {
	nkey, err := nats.NkeyOptionFromSeed(c.path)
	if err != nil {
		return nil, fmt.Errorf("fleet: credentials %s: %w", c.path, err)
	}
	subjects, err := NewSubjects(c.Project)
	if err != nil {
		return nil, err
	}
	return []nats.Option{
		nkey,
		nats.CustomInboxPrefix(subjects.Worker(c.Worker).Inbox),
		nats.Name("ctxgraphd worker " + c.Worker),
	}, nil
}
