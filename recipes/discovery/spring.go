package discovery

import "encoding/json"

// SpringClass is the Java class that Spring Cloud Zookeeper's payload names
// in its "@class" field.
const SpringClass = "org.springframework.cloud.zookeeper.discovery.ZookeeperInstance"

// SpringBasePath is Spring Cloud Zookeeper's default base path
// (spring.cloud.zookeeper.discovery.root).
const SpringBasePath = "/services"

// SpringInstance is the payload Spring Cloud Zookeeper registers with every
// instance (its ZookeeperInstance).
type SpringInstance struct {
	// ID is Spring's instance id (spring.application.name and a suffix, by
	// default).
	ID string
	// Name is the service's name.
	Name string
	// Metadata is the instance's metadata
	// (spring.cloud.zookeeper.discovery.metadata).
	Metadata map[string]string
}

// Payload returns s as the payload JSON that Spring writes, with
// "@class": SpringClass, for Instance.Payload.
func (s SpringInstance) Payload() json.RawMessage { return nil }

// ParseSpring reads a payload that Spring Cloud Zookeeper wrote. A payload
// that is not a JSON object, or names another "@class", gives an error
// matching ErrBadData.
func ParseSpring(payload json.RawMessage) (SpringInstance, error) {
	return SpringInstance{}, nil
}
