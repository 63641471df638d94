package transport_test

// The QUIC transport lives in transport/quic, which imports this package,
// so the package's own (internal) tests cannot import it. This external
// test file can: linking it into the test binary registers KindQUIC, and
// the conformance, rail and security tests keep running over QUIC through
// NetworkFor.
import _ "github.com/hetcomm/hetcomm/transport/quic"
