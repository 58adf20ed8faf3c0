package fleet

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"

	"github.com/nats-io/nats-server/v2/server"
)

// This file is the one place where the fleet's names live: subjects,
// streams, buckets, and what each worker is allowed to do with them. The
// server's users are built from workerPermissions, so that a name and the
// permission on it cannot drift apart.
//
// For project P and worker W (prefix ctxgraphd.P):
//
//	ctxgraphd.P.lanes                  the work queue's subject: the daemon publishes lanes
//	stream ctxgraphd_P_lanes           work-queue retention; consumer "workers" is pulled by all workers
//	ctxgraphd.P.worker.W.claim         W asks for a lane it pulled: its run's token and spec (request-reply)
//	ctxgraphd.P.worker.W.hook          W's hooks ask the daemon (request-reply)
//	ctxgraphd.P.worker.W.result        W says a lane's run ended (request-reply)
//	ctxgraphd.P.worker.W.events        W's traces and the run's stream events
//	ctxgraphd.P.worker.W.heartbeat     W is alive while a lane runs
//	ctxgraphd.P.worker.W.control       the daemon tells W (stop, pause); W only listens
//	ctxgraphd.P.worker.W.inbox.>       replies to W's requests, JetStream's included
//	ctxgraphd.P.daemon.>               the daemon's own; no worker reads or writes them
//	object store ctxgraphd_P_base      base bundles: the daemon writes, every worker reads
//	object store ctxgraphd_P_results_W W's result bundles: W writes, the daemon reads
//
// The daemon and JetStream are in the account "ctxgraphd"; each worker W is
// alone in "worker-W", which imports its own subjects and JetStream calls
// from it (accountsConfig), so that answers to W stay in W's account.
//
// Names are made of lower-case letters, digits and '-', and '_' only
// separates them, so that two (project, worker) pairs never make one
// stream or bucket name.

// nameRE is what a project or worker name may be: a subject token, a part
// of a stream name and of a file name, all at once.
var nameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,62}$`)

// checkName refuses a project or worker name that nameRE does not accept,
// saying what is allowed.
func checkName(what, name string) error {
	if !nameRE.MatchString(name) {
		return &kindError{kind: ErrBadName, msg: fmt.Sprintf("fleet: %s name %q is not allowed: want 1 to 63 lower-case letters, digits and '-', starting with a letter or digit (such as build-1)", what, name)}
	}
	return nil
}

// Subjects names everything of one project's fleet.
type Subjects struct{ project string }

// NewSubjects returns the names of project's fleet.
func NewSubjects(project string) (Subjects, error) {
	if err := checkName("project", project); err != nil {
		return Subjects{}, err
	}
	return Subjects{project: project}, nil
}

// Prefix starts every subject of the project.
func (s Subjects) Prefix() string { return "ctxgraphd." + s.project }

// Lanes is the subject the daemon publishes lanes to, the work queue's.
func (s Subjects) Lanes() string { return s.Prefix() + ".lanes" }

// LanesStream is the work queue: a stream with work-queue retention, so a
// lane is removed once a worker acknowledges it.
func (s Subjects) LanesStream() string { return "ctxgraphd_" + s.project + "_lanes" }

// LanesConsumer is the durable pull consumer of the work queue, which the
// daemon pulls each worker's Jobs from (Pull).
func (s Subjects) LanesConsumer() string { return "workers" }

// BaseBucket is the object store of base bundles, keyed by commit.
func (s Subjects) BaseBucket() string { return "ctxgraphd_" + s.project + "_base" }

// ResultsBucket is the object store of worker's result bundles.
func (s Subjects) ResultsBucket(worker string) string {
	return "ctxgraphd_" + s.project + "_results_" + worker
}

// Daemon is the daemon's own subjects (a wildcard); no worker may use them.
func (s Subjects) Daemon() string { return s.Prefix() + ".daemon.>" }

// Worker returns the subjects of one worker.
func (s Subjects) Worker(name string) WorkerSubjects {
	w := s.Prefix() + ".worker." + name
	return WorkerSubjects{
		Claim:     w + ".claim",
		Hook:      w + ".hook",
		Result:    w + ".result",
		Events:    w + ".events",
		Heartbeat: w + ".heartbeat",
		Pull:      w + ".pull",
		Ack:       w + ".ack",
		Control:   w + ".control",
		Inbox:     w + ".inbox",

		noJetStream: w + ".nojetstream",
	}
}

// Workers matches one kind of subject of every worker, for the daemon's
// subscriptions: Workers("hook") is ctxgraphd.P.worker.*.hook.
func (s Subjects) Workers(kind string) string { return s.Prefix() + ".worker.*." + kind }

// WorkerSubjects are one worker's subjects. The server lets only that
// worker publish on Claim, Hook, Result, Events and Heartbeat, and only it
// receive Control and its Inbox.
type WorkerSubjects struct {
	Claim     string // asks for a pulled lane's run
	Hook      string // the run's hooks, to the daemon
	Result    string // a lane ended
	Events    string // traces and stream events
	Heartbeat string // alive while a lane runs
	// Pull asks the daemon for the work queue's next Job, which it pulls
	// for the worker within the worker's share (Executor.onPull).
	Pull string
	// Ack is where a worker acknowledges the Jobs the daemon pulled for
	// it (Ack), the daemon acknowledging them on the queue.
	Ack     string
	Control string // from the daemon
	// Inbox prefixes the replies to the worker's requests: its connection
	// must use it (nats.CustomInboxPrefix; WorkerOptions does), since it
	// may receive on no other inbox.
	Inbox string

	// noJetStream is a subject nobody answers, the worker's account's
	// $JS.API.INFO (accountsConfig).
	noJetStream string
}

// jsAPI is the prefix of JetStream's API subjects.
const jsAPI = "$JS.API."

// objectStream is the stream under an object store bucket, as nats.go's
// object store names it.
func objectStream(bucket string) string { return "OBJ_" + bucket }

// readObjects are the API calls that open a bucket and read its objects
// with direct gets only (openObject): the stream's info (opening), the
// last message of a subject (an object's metadata; object stores allow
// direct gets), and the next message of a subject (its chunks, one by
// one). No consumer: one a worker made could deliver the stream into any
// subject, past its own permissions.
func readObjects(bucket string) []string {
	st := objectStream(bucket)
	return []string{
		jsAPI + "STREAM.INFO." + st,
		jsAPI + "DIRECT.GET." + st,
		jsAPI + "DIRECT.GET." + st + ".>",
	}
}

// writeObjects are the publishes and calls that put objects in a bucket:
// its chunk and metadata subjects, and a purge of the chunks a replaced or
// failed object leaves.
func writeObjects(bucket string) []string {
	return []string{
		"$O." + bucket + ".>",
		jsAPI + "STREAM.PURGE." + objectStream(bucket),
	}
}

// fleetAccount is the NATS account of the daemon and of JetStream: the
// work queue, the buckets and every worker's subjects as the daemon sees
// them live there, and no worker's user does.
const fleetAccount = "ctxgraphd"

// workerAccount is worker name's own NATS account, its user's alone. It
// holds nothing but what it imports from the fleet's account
// (workerServices, workerStreams), each export granted to this account
// only. The server answers a request into the asker's own account, so
// whatever reply subject a worker names, an answer to it (the daemon's,
// JetStream's) lands where only that worker listens: a worker cannot
// have the server publish into the fleet's account, nor another
// worker's.
func workerAccount(name string) string { return "worker-" + name }

// A worker's account's bounds, each of the server's memory in the
// daemon's process: a worker connects once, and subscribes to its control
// subject and its inbox (nats.go's one subscription for every request),
// and to its inbox's replies of a pull or two a slot.
const (
	workerMaxConnections   = 4
	workerMaxSubscriptions = 256
)

// service is a subject a worker may publish on, the fleet's account
// answering: one of its own subjects, or one JetStream call.
type service struct {
	subject string
}

// workerServices are everything a worker may publish, each a service of
// the fleet's account that worker's account imports: its own subjects
// (its pulls and acknowledgements of the work queue among them), the
// queue's consumer's info, and the reads and writes of its objects
// (readObjects, writeObjects). It is the worker's publish permission too.
// Pulls and acks go through the daemon (Pull, Ack), not to JetStream: the
// consumer's bound on waiting pulls is every worker's, one worker holding
// them all would keep every Job from the others, and JetStream's ack
// subjects take a pull too (+NXT) and any Job's sequence, whoever was
// given it; the daemon holds each worker to its share and its own Jobs.
func (s Subjects) workerServices(name string) []service {
	w := s.Worker(name)
	lanes, consumer := s.LanesStream(), s.LanesConsumer()
	out := []service{
		{subject: w.Claim}, {subject: w.Hook}, {subject: w.Result}, {subject: w.Events}, {subject: w.Heartbeat},
		{subject: jsAPI + "CONSUMER.INFO." + lanes + "." + consumer},
		{subject: w.Pull},
		{subject: w.Ack},
	}
	results := s.ResultsBucket(name)
	for _, subject := range append(append(readObjects(s.BaseBucket()), readObjects(results)...), writeObjects(results)...) {
		out = append(out, service{subject: subject})
	}
	return out
}

// workerStreams are what a worker may receive of the fleet account's
// subjects, imported into its account: the daemon's word to it. Its
// inbox needs no import: answers come back to the asker's account.
func (s Subjects) workerStreams(name string) []string { return []string{s.Worker(name).Control} }

// workerPermissions are everything a worker may do; anything else the
// server refuses with a permissions violation. Its account would carry
// nothing else anywhere; the permission says so to the worker at once.
func (s Subjects) workerPermissions(name string) *server.Permissions {
	w := s.Worker(name)
	var pub []string
	for _, svc := range s.workerServices(name) {
		pub = append(pub, svc.subject)
	}
	return &server.Permissions{
		Publish:   &server.SubjectPermission{Allow: pub},
		Subscribe: &server.SubjectPermission{Allow: append(s.workerStreams(name), w.Inbox+".>")},
	}
}

// accountsConfig is the server's accounts for workers, in the server's
// configuration language (JSON is of it): the fleet's account, with
// JetStream, exporting each worker's services and streams to that
// worker's account alone, and each worker's account importing them. The
// server parses it as it would a file, so that a reload sets the
// accounts up as a start does.
func (s Subjects) accountsConfig(workers []string) ([]byte, error) {
	type (
		ref struct {
			Account string `json:"account"`
			Subject string `json:"subject"`
		}
		export struct {
			Service  string   `json:"service,omitempty"`
			Stream   string   `json:"stream,omitempty"`
			Accounts []string `json:"accounts"`
		}
		imp struct {
			Service *ref   `json:"service,omitempty"`
			Stream  *ref   `json:"stream,omitempty"`
			To      string `json:"to,omitempty"`
		}
		limits struct {
			Connections   int `json:"max_connections"`
			Subscriptions int `json:"max_subscriptions"`
		}
		account struct {
			JetStream string   `json:"jetstream,omitempty"`
			Exports   []export `json:"exports,omitempty"`
			Imports   []imp    `json:"imports,omitempty"`
			Limits    *limits  `json:"limits,omitempty"`
		}
	)
	fleet := account{JetStream: "enabled"}
	accounts := map[string]account{}
	for _, name := range workers {
		to := []string{workerAccount(name)}
		own := account{Limits: &limits{Connections: workerMaxConnections, Subscriptions: workerMaxSubscriptions}}
		for _, svc := range s.workerServices(name) {
			fleet.Exports = append(fleet.Exports, export{Service: svc.subject, Accounts: to})
			own.Imports = append(own.Imports, imp{Service: &ref{Account: fleetAccount, Subject: svc.subject}})
		}
		for _, subject := range s.workerStreams(name) {
			fleet.Exports = append(fleet.Exports, export{Stream: subject, Accounts: to})
			own.Imports = append(own.Imports, imp{Stream: &ref{Account: fleetAccount, Subject: subject}})
		}
		// An account without JetStream of its own gets the server's
		// JetStream answers (all "not enabled"), racing the fleet's own,
		// unless it imports $JS.API.INFO from elsewhere: it does, from a
		// subject nobody answers. No worker may publish on it anyway.
		fleet.Exports = append(fleet.Exports, export{Service: s.Worker(name).noJetStream, Accounts: to})
		own.Imports = append(own.Imports, imp{Service: &ref{Account: fleetAccount, Subject: s.Worker(name).noJetStream}, To: jsAPI + "INFO"})
		accounts[workerAccount(name)] = own
	}
	accounts[fleetAccount] = fleet
	// Not HTML's escapes: the configuration language reads no \u.
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(map[string]any{"accounts": accounts}); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
