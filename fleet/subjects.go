package fleet

import (
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

// LanesConsumer is the durable pull consumer every worker pulls lanes from.
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
		Control:   w + ".control",
		Inbox:     w + ".inbox",
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
	Control   string // from the daemon
	// Inbox prefixes the replies to the worker's requests: its connection
	// must use it (nats.CustomInboxPrefix; WorkerOptions does), since it
	// may receive on no other inbox.
	Inbox string
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

// workerPermissions are everything a worker may do; anything else the
// server refuses with a permissions violation.
func (s Subjects) workerPermissions(name string) *server.Permissions {
	w := s.Worker(name)
	lanes, consumer := s.LanesStream(), s.LanesConsumer()
	pub := []string{
		w.Claim, w.Hook, w.Result, w.Events, w.Heartbeat,
		// Pull lanes and acknowledge them (ack, nak, in progress, term).
		jsAPI + "CONSUMER.INFO." + lanes + "." + consumer,
		jsAPI + "CONSUMER.MSG.NEXT." + lanes + "." + consumer,
		"$JS.ACK." + lanes + "." + consumer + ".>",
	}
	pub = append(pub, readObjects(s.BaseBucket())...)
	results := s.ResultsBucket(name)
	pub = append(pub, readObjects(results)...)
	pub = append(pub, writeObjects(results)...)
	return &server.Permissions{
		Publish:   &server.SubjectPermission{Allow: pub},
		Subscribe: &server.SubjectPermission{Allow: []string{w.Control, w.Inbox + ".>"}},
	}
}
