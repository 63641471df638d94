// Closing a Conn: CloseWrite and the FIN, Close with its linger, and
// teardown, which kills the connection once.

package rudp

// CloseWrite sends a FIN after the queued data: the peer's Read returns
// io.EOF once it has read everything. Reading continues to work.
func (c *Conn) CloseWrite() error {
	c.mu.Lock()
	if c.state == stateDead {
		err := c.err
		c.mu.Unlock()
		return opError("close", c, err)
	}
	if c.userClosed {
		c.mu.Unlock()
		return opError("close", c, ErrClosed)
	}
	c.queueFINLocked()
	c.mu.Unlock()
	c.flush()
	return nil
}

func (c *Conn) queueFINLocked() {
	c.wClosed = true
	if c.snd.finQueued {
		return
	}
	c.snd.finQueued = true
	s := newSegment(dataOff)
	s.fin = true
	c.enqueueLocked(s)
}

// Close sends the queued data and a FIN, waits (at most Config.Linger) for
// them to be acknowledged, then stops the connection's goroutines and
// releases its socket. If the peer had not finished its own direction it
// is sent an RST, so its Writes fail instead of hanging. Close is
// idempotent; blocked Reads and Writes return an error matching
// net.ErrClosed.
func (c *Conn) Close() error {
	c.closeOnce.Do(func() {
		c.mu.Lock()
		c.userClosed = true
		close(c.closing)
		abort := false
		switch {
		case c.state == stateDead:
		case c.cfg.Linger < 0 || c.state != stateEstablished:
			abort = true
		default:
			c.queueFINLocked()
			c.lingerAt = c.now() + c.cfg.Linger
			c.armLocked(c.lingerAt)
			c.checkFinishLocked()
		}
		fin := c.finish
		c.mu.Unlock()
		if abort || fin {
			c.teardown(ErrClosed, true)
		} else {
			c.flush()
		}
	})
	<-c.quit
	c.wg.Wait()
	c.ep.wait()
	return nil
}

// checkFinishLocked decides whether a closed connection is done.
func (c *Conn) checkFinishLocked() {
	// The FIN alone may be SACKed while earlier packets are missing: done
	// only when the cumulative acknowledgement covers the whole stream.
	if c.userClosed && c.snd.finAcked && c.snd.una == c.snd.end {
		c.finish = true
	}
}

// teardown kills the connection once: blocked calls return cause (or
// buffered data and EOF), an RST tells the peer if rst is set and the peer
// has not finished, and the endpoint releases the socket.
func (c *Conn) teardown(cause error, rst bool) {
	c.mu.Lock()
	if c.state == stateDead {
		c.mu.Unlock()
		return
	}
	c.state = stateDead
	c.err = cause
	c.timer.Stop()
	close(c.quit)
	sendRST := rst && c.peerID != 0 && !c.rcv.eof
	var pkt []byte
	if sendRST {
		pkt = buildRST(make([]byte, maxCtrlLen), c.peerID, c.localID, usec(c.now()), c.auth)
		c.stats.PacketsSent++
	}
	c.mu.Unlock()
	if sendRST {
		// Twice: a lost RST leaves the peer waiting for its Linger.
		_ = c.ep.write(pkt, c.peer)
		_ = c.ep.write(pkt, c.peer)
	}
	c.rdl.stop()
	c.wdl.stop()
	c.ep.detach(c)
}
