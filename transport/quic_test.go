package transport

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// QUIC is registered in this test binary by quic_register_test.go.

// On QUIC a heartbeat sent after a large rendezvous payload overtakes it:
// the bulk channel does not hold up the control channel.
func TestQUICControlNotBehindBulk(t *testing.T) {
	a, b := pair(t, socketFactory(KindQUIC), testConfig(0), testConfig(1))
	ctx := testCtx(t)
	big := pattern(32 << 20)
	sent := make(chan error, 1)
	go func() { sent <- a.Send(ctx, Header{Type: MsgRndvData, Seq: 1}, big) }()
	time.Sleep(5 * time.Millisecond) // let the bulk transfer start
	require.NoError(t, a.Send(ctx, Header{Type: MsgHeartbeat, Seq: 2}, nil))
	m, err := b.Recv(ctx)
	require.NoError(t, err)
	require.Equal(t, MsgHeartbeat, m.Header.Type, "the heartbeat should arrive before the 32 MiB payload completes")
	m, err = b.Recv(ctx)
	require.NoError(t, err)
	require.Equal(t, MsgRndvData, m.Header.Type)
	require.Equal(t, big, m.Payload)
	require.NoError(t, <-sent)
}

func TestChannelOf(t *testing.T) {
	require.Equal(t, ChanBulk, ChannelOf(MsgRndvData))
	for _, typ := range []MsgType{MsgEager, MsgRTS, MsgCTS, MsgControl, MsgHeartbeat, MsgClose, 200} {
		require.Equal(t, ChanControl, ChannelOf(typ), typ.String())
	}
}
