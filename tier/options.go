package tier

import (
	"fmt"
	"net/http"
	"time"
)

// Credentials are an S3 access key pair.
type Credentials struct {
	AccessKey, SecretKey, SessionToken string
}

// Options configure a Tier. The zero value of each field means the
// default named beside it; EnsureDefaults fills them in.
type Options struct {
	// Endpoint is the S3 server's base URL, e.g. http://127.0.0.1:7070.
	// Required.
	Endpoint string
	// Bucket holds every packet. Required; it must exist.
	Bucket string
	// Prefix is prepended to every key ("" puts namespaces at the bucket's
	// root). No leading or trailing "/".
	Prefix string
	// Region signs requests; default "us-east-1".
	Region string
	// Credentials sign every request, unless NamespaceCredentials has an
	// entry for the request's namespace: then that namespace's requests
	// (and only they) use its own pair, which the server may confine to
	// the namespace's prefix.
	Credentials          Credentials
	NamespaceCredentials map[string]Credentials
	// PartSize is the size of a payload part; default 4 MiB, at least
	// 4 KiB.
	PartSize int
	// Parallel is how many parts one Push or Fetch moves at once;
	// default 8.
	Parallel int
	// Attempts is how many times an idempotent request is tried before
	// it is ErrUnavailable (or ErrCorruption, when the bytes kept failing
	// their checks); default 3.
	Attempts int
	// RequestTimeout bounds one attempt of one request, body included;
	// default 30 s. A call's worst case is about Attempts *
	// (RequestTimeout + Backoff * 2^Attempts).
	RequestTimeout time.Duration
	// Backoff is the wait before the second attempt, doubled for each
	// later one; default 50 ms.
	Backoff time.Duration
	// HTTPClient sends the requests; default (nil) the SDK's own
	// (awshttp.NewBuildableClient: keep-alive, 10 idle connections per
	// host).
	HTTPClient *http.Client
}

// EnsureDefaults fills the zero fields with their defaults and returns o.
func (o *Options) EnsureDefaults() *Options {
	if o.Region == "" {
		o.Region = "us-east-1"
	}
	if o.PartSize == 0 {
		o.PartSize = 4 << 20
	}
	if o.Parallel == 0 {
		o.Parallel = 8
	}
	if o.Attempts == 0 {
		o.Attempts = 3
	}
	if o.RequestTimeout == 0 {
		o.RequestTimeout = 30 * time.Second
	}
	if o.Backoff == 0 {
		o.Backoff = 50 * time.Millisecond
	}
	return o
}

// Validate reports unusable options as ErrInvalidArgument.
func (o *Options) Validate() error {
	bad := func(f string, args ...any) error {
		return fmt.Errorf("%w: tier options: %s", ErrInvalidArgument, fmt.Sprintf(f, args...))
	}
	switch {
	case o.Endpoint == "":
		return bad("no endpoint")
	case o.Bucket == "":
		return bad("no bucket")
	case len(o.Prefix) > 0 && (o.Prefix[0] == '/' || o.Prefix[len(o.Prefix)-1] == '/'):
		return bad("prefix %q starts or ends with /", o.Prefix)
	case o.PartSize < minPartSize || o.PartSize > maxPartSize:
		return bad("part size %d outside [%d, %d]", o.PartSize, minPartSize, maxPartSize)
	case o.Parallel < 1 || o.Attempts < 1 || o.RequestTimeout < 0 || o.Backoff < 0:
		return bad("parallel %d, attempts %d, timeout %v, backoff %v", o.Parallel, o.Attempts, o.RequestTimeout, o.Backoff)
	}
	return nil
}
