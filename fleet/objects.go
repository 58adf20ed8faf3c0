package fleet

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"

	"github.com/nats-io/nats.go/jetstream"
)

// A worker reads the objects of a bucket (a lane's base bundle and its
// dependencies) with direct gets of the bucket's stream, never with a
// consumer: nats.go's ObjectStore.Get makes an ordered push consumer, and
// a consumer delivers the stream into any subject of the fleet's account
// its maker names, another worker's or the work queue's. Direct gets
// answer only into the asker's own account; making consumers is no
// worker's (workerServices).
//
// The layout read is nats.go's object store's (jetstream/object.go): an
// object's metadata is the last message on $O.<bucket>.M.<name, base64
// URL>, an ObjectInfo; its chunks, in order, the messages on
// $O.<bucket>.C.<its NUID>; its digest SHA-256 of them all.

// openObject opens name in bucket for reading, at most limit bytes, and
// only as the object whose digest is want ("": any); the reader fails on a
// chunk past the object's size or count and, at the end, on chunks whose
// digest is not the object's.
func openObject(ctx context.Context, js jetstream.JetStream, bucket, name string, limit int64, want string) (io.Reader, error) {
	st, err := js.Stream(ctx, objectStream(bucket))
	if err != nil {
		return nil, fmt.Errorf("bucket %s: %w", bucket, err)
	}
	meta, err := st.GetLastMsgForSubject(ctx, "$O."+bucket+".M."+base64.URLEncoding.EncodeToString([]byte(name)))
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil, fmt.Errorf("%s in %s: %w", name, bucket, jetstream.ErrObjectNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("%s in %s: %w", name, bucket, err)
	}
	var info jetstream.ObjectInfo
	if err := json.Unmarshal(meta.Data, &info); err != nil {
		return nil, fmt.Errorf("%s in %s: its metadata: %w", name, bucket, err)
	}
	switch {
	case info.Deleted:
		return nil, fmt.Errorf("%s in %s: %w", name, bucket, jetstream.ErrObjectNotFound)
	case info.Opts != nil && info.Opts.Link != nil:
		// Read whole, where it is: a link leads into another bucket (one
		// its asker may not read), or round to itself.
		return nil, fmt.Errorf("%s in %s is a link, not an object", name, bucket)
	case info.Size > uint64(limit):
		return nil, fmt.Errorf("%s in %s is %d bytes, over the bound of %d", name, bucket, info.Size, limit)
	case want != "" && info.Digest != want:
		return nil, fmt.Errorf("%s in %s is not the object the daemon put there (its digest is %s, not %s)", name, bucket, info.Digest, want)
	}
	return &objectReader{ctx: ctx, st: st, chunks: "$O." + bucket + ".C." + info.NUID, name: name, seq: 1,
		size: info.Size, left: info.Chunks, digest: info.Digest, h: sha256.New()}, nil
}

// objectReader reads an object's chunks one direct get at a time.
type objectReader struct {
	ctx    context.Context
	st     jetstream.Stream
	chunks string // the chunks' subject
	name   string
	seq    uint64 // where the next chunk is looked for
	size   uint64 // what is left of the object's size
	left   uint32 // chunks left
	digest string
	h      hash.Hash
	buf    []byte
	err    error
}

func (r *objectReader) Read(p []byte) (int, error) {
	for len(r.buf) == 0 && r.err == nil {
		r.err = r.next()
	}
	if len(r.buf) == 0 {
		return 0, r.err
	}
	n := copy(p, r.buf)
	r.buf = r.buf[n:]
	return n, nil
}

// next fetches the next chunk, or says the object is whole (io.EOF).
func (r *objectReader) next() error {
	if r.left == 0 {
		if r.size != 0 {
			return fmt.Errorf("object %s ends %d bytes short", r.name, r.size)
		}
		if got := jetstream.GetObjectDigestValue(r.h); got != r.digest {
			return fmt.Errorf("object %s: its chunks' digest %s is not its own %s", r.name, got, r.digest)
		}
		return io.EOF
	}
	m, err := r.st.GetMsg(r.ctx, r.seq, jetstream.WithGetMsgSubject(r.chunks))
	if err != nil {
		return fmt.Errorf("object %s: %w", r.name, err)
	}
	if uint64(len(m.Data)) > r.size {
		return fmt.Errorf("object %s: its chunks are more than its size", r.name)
	}
	r.seq, r.left, r.size, r.buf = m.Sequence+1, r.left-1, r.size-uint64(len(m.Data)), m.Data
	r.h.Write(m.Data)
	return nil
}
