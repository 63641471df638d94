package comm

// QUIC lives in its own package so that programs that use transport
// without comm (the launcher) do not link quic-go; comm serves every
// transport (HETCOMM_TRANSPORT=quic), so it links QUIC in here.
import _ "github.com/hetcomm/hetcomm/transport/quic"
