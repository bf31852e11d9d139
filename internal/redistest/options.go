package redistest

import (
	"slices"
	"strings"
)

// adminUserName is the ACL user that redistest adds to every ACL file so that
// its admin helpers keep full privileges whatever users the test defines.
const adminUserName = "redistest-admin"

// Option configures the servers started by Start, StartN and StartCluster.
type Option func(*config)

// config is the configuration shared by every server of one Start, StartN or
// StartCluster call. It is not modified after the servers are started.
type config struct {
	password string
	acl      []string
	args     []string
	useTLS   bool
	persist  bool
}

// WithPassword protects the servers with a password (requirepass, i.e. the
// password of the default user). Options, Client and ClusterOptions use it.
func WithPassword(pw string) Option {
	return func(c *config) { c.password = pw }
}

// WithACL writes the given ACL user lines to an aclfile loaded by the
// servers, e.g. "user app on >secret ~lockkit:* +@all" or "user default off".
// It may be given several times; the lines add up.
//
// Options, Client and ClusterOptions authenticate as the user of the first
// line that sets a plain-text password (">pw"); without such a line they fall
// back to WithPassword, if any. The admin helpers (Do, Stop, Flush, ...) use
// an extra user named "redistest-admin" with full privileges, which is added
// to the aclfile. Combined with WithPassword, the password becomes the default
// user's, unless a line configures the default user itself.
func WithACL(lines ...string) Option {
	return func(c *config) { c.acl = append(c.acl, lines...) }
}

// WithArgs appends extra redis-server arguments, e.g. WithArgs("--maxmemory",
// "10mb"). They come after the ones redistest sets, so they can override most
// of them (not the ports, bind address or directory). It may be given several
// times; the arguments add up.
func WithArgs(args ...string) Option {
	return func(c *config) { c.args = append(c.args, args...) }
}

// WithTLS makes the servers listen on a TLS-only port, with a self-signed CA
// and a server certificate (for 127.0.0.1, ::1 and localhost) generated in the
// test. Clients need no certificate of their own (tls-auth-clients no); use
// TLSConfig, Options or ClusterOptions to connect. In a cluster, the cluster
// bus and replication use TLS as well. If the redis-server build has no TLS
// support, the test is skipped.
func WithTLS() Option {
	return func(c *config) { c.useTLS = true }
}

// WithPersistence turns on the append-only file with fsync on every write (appendonly yes,
// appendfsync always), and makes Restart keep the data: a restarted server comes back with every
// acknowledged write, as a production node with persistence would after a crash (Kill, Restart).
func WithPersistence() Option {
	return func(c *config) { c.persist = true }
}

// newConfig applies opts to a fresh config, ignoring nil options.
func newConfig(opts []Option) *config {
	c := &config{}
	for _, o := range opts {
		if o != nil {
			o(c)
		}
	}
	return c
}

// aclLines returns the lines of the aclfile: the test's lines, the default
// user's password when WithPassword is combined with WithACL, and the admin
// user. It returns nil when the test set no ACL.
func (c *config) aclLines(adminPass string) []string {
	if len(c.acl) == 0 {
		return nil
	}
	lines := slices.Clone(c.acl)
	if c.password != "" && !slices.ContainsFunc(c.acl, func(l string) bool { return aclUserName(l) == "default" }) {
		lines = append(lines, "user default on >"+c.password+" ~* &* +@all")
	}
	return append(lines, "user "+adminUserName+" on >"+adminPass+" ~* &* +@all")
}

// clientCredentials returns the username and password that Options uses.
func (c *config) clientCredentials() (user, pass string) {
	for _, line := range c.acl {
		name := aclUserName(line)
		if name == "" {
			continue
		}
		for _, f := range strings.Fields(line)[2:] {
			if strings.HasPrefix(f, ">") {
				return name, f[1:]
			}
		}
	}
	return "", c.password
}

// aclUserName returns the user name of an ACL line "user NAME rules...", or
// "" if the line is not of that form.
func aclUserName(line string) string {
	f := strings.Fields(line)
	if len(f) < 2 || f[0] != "user" {
		return ""
	}
	return f[1]
}
