package discovery

import (
	"encoding/json"
	"fmt"
	"time"
)

// ServiceType is Curator's ServiceType: it says what kind of node holds an
// instance.
type ServiceType int

const (
	// Dynamic (DYNAMIC, the zero value): an ephemeral node, gone with the
	// session that registered it.
	Dynamic ServiceType = iota
	// Static (STATIC): a persistent node.
	Static
	// Permanent (PERMANENT): a persistent node.
	Permanent
	// DynamicSequential (DYNAMIC_SEQUENTIAL): an ephemeral node whose name
	// ends with the server's sequence number.
	DynamicSequential
)

// String returns the name Curator writes, e.g. "DYNAMIC".
func (t ServiceType) String() string {
	switch t {
	case Dynamic:
		return "DYNAMIC"
	case Static:
		return "STATIC"
	case Permanent:
		return "PERMANENT"
	case DynamicSequential:
		return "DYNAMIC_SEQUENTIAL"
	}
	return fmt.Sprintf("ServiceType(%d)", int(t))
}

// Instance is one instance of a service (Curator's ServiceInstance), as it is
// registered under <base>/<Name>/<ID>. Its JSON (MarshalJSON, UnmarshalJSON)
// is the one Curator's JsonInstanceSerializer reads and writes.
type Instance struct {
	// Name is the service's name: the node below the base path.
	Name string
	// ID identifies the instance within its service: the name of its node.
	// Register gives an empty ID a random UUID, as Curator does.
	ID string
	// Address is the host name or IP address the instance serves on.
	Address string
	// Port is the instance's port; 0 means none (written as null).
	Port int
	// SSLPort is the instance's TLS port; 0 means none (written as null).
	SSLPort int
	// Payload is any JSON value, as Curator's payload; nil is none (null).
	// See SpringInstance for the payload of Spring Cloud Zookeeper.
	Payload json.RawMessage
	// RegistrationTime is when the instance was registered, kept to the
	// millisecond (registrationTimeUTC). Register gives a zero time the
	// current time.
	RegistrationTime time.Time
	// Type says what kind of node holds the instance.
	Type ServiceType
	// URISpec is Curator's UriSpec in its template form, e.g.
	// "{scheme}://{address}:{port}"; "" is none. It is written as its parts.
	URISpec string
	// Disabled marks an instance that a Provider never picks. The zero value
	// is enabled (written as "enabled": true).
	Disabled bool
}

// URI returns URISpec filled in from the instance, as Curator's
// buildUriSpec does: {scheme} is "https" when SSLPort is set, else "http";
// {name}, {id}, {address}, {port}, {ssl-port}, {registration-time-utc} and
// {service-type} are the instance's; an unknown variable is left out.
// It returns "" when URISpec is empty.
func (in Instance) URI() string {
	return ""
}

// MarshalJSON returns the instance as Curator's JsonInstanceSerializer
// writes it.
func (in Instance) MarshalJSON() ([]byte, error) {
	return nil, nil
}

// UnmarshalJSON reads an instance as Curator's JsonInstanceSerializer writes
// it. Unknown fields are ignored, a missing or null port is 0 and a missing
// "enabled" is true. Data that is not such an object gives an error
// matching ErrBadData.
func (in *Instance) UnmarshalJSON(data []byte) error {
	return nil
}
