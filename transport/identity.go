package transport

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"fmt"
	"math/big"
	"time"
)

// Fingerprint is the SHA-256 of a certificate's DER encoding.
type Fingerprint [sha256.Size]byte

func (f Fingerprint) String() string { return hex.EncodeToString(f[:]) }

// ParseFingerprint parses the hex form produced by Fingerprint.String.
func ParseFingerprint(s string) (Fingerprint, error) {
	var f Fingerprint
	b, err := hex.DecodeString(s)
	if err != nil || len(b) != len(f) {
		return f, fmt.Errorf("%w: bad fingerprint %q", ErrBadConfig, s)
	}
	copy(f[:], b)
	return f, nil
}

// Identity is a rank's ephemeral TLS identity: a self-signed ECDSA P-256
// certificate made for one job. The bootstrap publishes Fingerprint so that
// peers can pin it (Config.Fingerprints).
type Identity struct {
	Cert        tls.Certificate
	Fingerprint Fingerprint
}

// NewIdentity generates a fresh key and a self-signed certificate whose
// subject names the job and the rank, valid for 7 days.
func NewIdentity(job uint64, rank int) (*Identity, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: fmt.Sprintf("hetcomm job %016x rank %d", job, rank)},
		DNSNames:     []string{"hetcomm"},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(7 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	return &Identity{
		Cert:        tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key},
		Fingerprint: sha256.Sum256(der),
	}, nil
}

const alpn = "hetcomm/1"

// tlsConfig builds the TLS 1.3 configuration shared by the TLS and QUIC
// transports. Chains are not verified against any CA: the peer's leaf
// certificate must instead have a fingerprint listed in cfg.Fingerprints
// (when that map is non-empty). Which rank owns it is checked after the
// membership handshake, by checkFingerprint.
func tlsConfig(cfg *Config, id *Identity, server bool) *tls.Config {
	trusted := make(map[Fingerprint]bool, len(cfg.Fingerprints))
	for _, f := range cfg.Fingerprints {
		trusted[f] = true
	}
	verify := func(raw [][]byte, _ [][]*x509.Certificate) error {
		if len(raw) == 0 {
			return ErrFingerprint
		}
		if len(trusted) > 0 && !trusted[sha256.Sum256(raw[0])] {
			return ErrFingerprint
		}
		return nil
	}
	tc := &tls.Config{
		MinVersion:            tls.VersionTLS13,
		Certificates:          []tls.Certificate{id.Cert},
		NextProtos:            []string{alpn},
		InsecureSkipVerify:    true, // replaced by VerifyPeerCertificate
		VerifyPeerCertificate: verify,
		ServerName:            "hetcomm",
	}
	if server {
		tc.ClientAuth = tls.RequireAnyClientCert
	}
	return tc
}

// checkFingerprint verifies that the certificate the peer presented is the
// one published for the rank it authenticated as.
func checkFingerprint(cfg *Config, peer int, cs *tls.ConnectionState) error {
	if len(cfg.Fingerprints) == 0 {
		return nil
	}
	if len(cs.PeerCertificates) == 0 {
		return ErrFingerprint
	}
	want, ok := cfg.Fingerprints[peer]
	if !ok || sha256.Sum256(cs.PeerCertificates[0].Raw) != want {
		return fmt.Errorf("%w: rank %d", ErrFingerprint, peer)
	}
	return nil
}

// tlsBinding exports keying material that ties the membership handshake to
// this TLS session, so a relaying man in the middle cannot forward it.
func tlsBinding(cs *tls.ConnectionState) ([]byte, error) {
	return cs.ExportKeyingMaterial("EXPORTER-hetcomm-handshake", nil, 32)
}
