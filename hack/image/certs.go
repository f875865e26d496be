package main

import (
	"bytes"
	"encoding/pem"
	"errors"

	"golang.org/x/crypto/x509roots/fallback/bundle"
)

// caBundle returns the Mozilla (NSS) roots that x509roots/fallback embeds,
// PEM-encoded in the bundle's order, for /etc/ssl/certs/ca-certificates.crt:
// the go.sum of this module pins them, so the same source gives the same file.
//
// A root with a Constraint (an NSS distrust-after date) is left out: a PEM
// file cannot carry the constraint, and without it the root would be trusted
// for certificates issued after its distrust date.
func caBundle() ([]byte, error) {
	var buf bytes.Buffer
	for r := range bundle.Roots() {
		if r.Constraint != nil {
			continue
		}
		if err := pem.Encode(&buf, &pem.Block{Type: "CERTIFICATE", Bytes: r.Certificate}); err != nil {
			return nil, err
		}
	}
	if buf.Len() == 0 {
		return nil, errors.New("CA bundle: x509roots/fallback has no unconstrained roots")
	}
	return buf.Bytes(), nil
}
