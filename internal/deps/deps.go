package deps

import (
	_ "github.com/quic-go/quic-go"
	_ "github.com/stretchr/testify/require"
	_ "github.com/vmihailenco/msgpack/v5"
	_ "golang.org/x/sync/errgroup"
	_ "gonum.org/v1/plot"
)
