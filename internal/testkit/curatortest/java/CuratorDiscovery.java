// CuratorDiscovery is an Apache Curator ServiceDiscovery (curator-x-discovery)
// driven by the Go package curatortest through a line protocol.
//
// Usage: java CuratorDiscovery <connectString> <basePath> spring|object [sessionTimeoutMs]
//
// The base path is a full server path (no Curator namespace). With "spring"
// the payload class is ZookeeperInstance and the serializer is
// JsonInstanceSerializer<ZookeeperInstance>, as Spring Cloud Zookeeper
// configures them; with "object" the payload is any JSON (Object.class).
// One line on stdin is one command:
//
//   register <name> <id> <port> <type> -> REGISTERED <id>   (ServiceInstance.builder(): address
//                                          127.0.0.1, uriSpec {scheme}://{address}:{port}, payload
//                                          ZookeeperInstance(id, name, {zone: z-<id>}) or {"k": id})
//   update <id> <port>   -> UPDATED <id>        (updateService with a new port)
//   unregister <id>      -> UNREGISTERED <id>   (unregisterService)
//   names                -> NAMES <name>...     (queryForNames, sorted)
//   query <name>         -> INSTANCES <json>    (queryForInstances)
//   cache <name>         -> CACHE <name>        (a ServiceCache, started; its listener prints
//                                               CHANGED <name> at each cacheChanged)
//   cached <name>        -> CACHED <json>       (that cache's getInstances)
//   provider <name>      -> PROVIDER <name>     (a ServiceProvider, started)
//   pick <name>          -> PICKED <id>|-       (its getInstance)
//   bench <name>         -> BENCH <loadNanos> <heapBytes> <instances>   (a new ServiceCache: the
//                                               time its start() took and the heap it added, after GCs;
//                                               its changes print CHANGED bench:<name>)
//   session              -> SESSION 0x<id>      (the client's ZooKeeper session id)
//   close                -> CLOSED              (closes the caches, providers and the discovery,
//                                               which unregisters what it registered)
//   quit or end of input -> the process exits
//
// <json> is an array with one object per instance: "instance", the instance as
// the serializer writes it after reading it; "payloadClass", the Java class of
// the payload read (null for none); "spring", the ZookeeperInstance's fields
// when the payload is one. At start it prints READY once connected. A failed
// command prints "ERR <command>: <exception>".
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeSet;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.state.ConnectionState;
import org.apache.curator.x.discovery.ServiceCache;
import org.apache.curator.x.discovery.ServiceDiscovery;
import org.apache.curator.x.discovery.ServiceDiscoveryBuilder;
import org.apache.curator.x.discovery.ServiceInstance;
import org.apache.curator.x.discovery.ServiceProvider;
import org.apache.curator.x.discovery.ServiceType;
import org.apache.curator.x.discovery.UriSpec;
import org.apache.curator.x.discovery.details.JsonInstanceSerializer;
import org.apache.curator.x.discovery.details.ServiceCacheListener;
import org.springframework.cloud.zookeeper.discovery.ZookeeperInstance;

public final class CuratorDiscovery<T> {
    private static final ObjectMapper JSON = new ObjectMapper();

    private final CuratorFramework client;
    private final Class<T> payloadClass;
    private final boolean spring;
    private final JsonInstanceSerializer<T> serializer;
    private final ServiceDiscovery<T> discovery;
    private final Map<String, ServiceInstance<T>> registered = new HashMap<>();
    private final Map<String, ServiceCache<T>> caches = new HashMap<>();
    private final Map<String, ServiceProvider<T>> providers = new HashMap<>();

    private CuratorDiscovery(CuratorFramework client, String basePath, Class<T> payloadClass, boolean spring) throws Exception {
        this.client = client;
        this.payloadClass = payloadClass;
        this.spring = spring;
        this.serializer = new JsonInstanceSerializer<>(payloadClass);
        this.discovery = ServiceDiscoveryBuilder.builder(payloadClass)
                .client(client).basePath(basePath).serializer(serializer).build();
        this.discovery.start();
    }

    public static void main(String[] args) throws Exception {
        if (args.length < 3) {
            System.err.println("usage: CuratorDiscovery <connectString> <basePath> spring|object [sessionTimeoutMs]");
            System.exit(2);
        }
        int sessionTimeout = args.length > 3 ? Integer.parseInt(args[3]) : 10000;
        CuratorFramework client = Proto.connect(args[0], sessionTimeout);
        if (args[2].equals("spring")) {
            new CuratorDiscovery<>(client, args[1], ZookeeperInstance.class, true).serve();
        } else {
            new CuratorDiscovery<>(client, args[1], Object.class, false).serve();
        }
    }

    @SuppressWarnings("unchecked")
    private T payload(String name, String id) {
        if (spring) {
            Map<String, String> md = new HashMap<>();
            md.put("zone", "z-" + id);
            return (T) new ZookeeperInstance(id, name, md);
        }
        Map<String, Object> m = new HashMap<>();
        m.put("k", id);
        return (T) m;
    }

    private ServiceInstance<T> build(String name, String id, int port, ServiceType type, long registered) throws Exception {
        return ServiceInstance.<T>builder()
                .name(name).id(id).address("127.0.0.1").port(port)
                .serviceType(type).registrationTimeUTC(registered)
                .uriSpec(new UriSpec("{scheme}://{address}:{port}"))
                .payload(payload(name, id)).build();
    }

    private String describe(Collection<ServiceInstance<T>> instances) throws Exception {
        ArrayNode out = JSON.createArrayNode();
        for (ServiceInstance<T> in : instances) {
            ObjectNode o = out.addObject();
            o.set("instance", JSON.readTree(serializer.serialize(in)));
            Object p = in.getPayload();
            o.put("payloadClass", p == null ? null : p.getClass().getName());
            if (p instanceof ZookeeperInstance) {
                ZookeeperInstance z = (ZookeeperInstance) p;
                ObjectNode s = o.putObject("spring");
                s.put("id", z.getId());
                s.put("name", z.getName());
                s.set("metadata", JSON.valueToTree(z.getMetadata()));
            }
        }
        return JSON.writeValueAsString(out);
    }

    private static long usedHeap() {
        Runtime rt = Runtime.getRuntime();
        for (int i = 0; i < 3; i++) {
            System.gc();
        }
        return rt.totalMemory() - rt.freeMemory();
    }

    private ServiceCache<T> startCache(String name, String label) throws Exception {
        ServiceCache<T> c = discovery.serviceCacheBuilder().name(name).build();
        c.addListener(new ServiceCacheListener() {
            @Override
            public void cacheChanged() {
                Proto.print("CHANGED " + label);
            }

            @Override
            public void stateChanged(CuratorFramework cf, ConnectionState st) {
            }
        });
        c.start();
        return c;
    }

    private void serve() throws Exception {
        Proto.print("READY");
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            line = line.trim();
            if (line.equals("quit")) {
                break;
            }
            if (line.isEmpty()) {
                continue;
            }
            String[] f = line.split("\\s+");
            try {
                switch (f[0]) {
                    case "register": {
                        ServiceInstance<T> si = build(f[1], f[2], Integer.parseInt(f[3]), ServiceType.valueOf(f[4]),
                                System.currentTimeMillis());
                        discovery.registerService(si);
                        registered.put(si.getId(), si);
                        Proto.print("REGISTERED " + si.getId());
                        break;
                    }
                    case "update": {
                        ServiceInstance<T> old = registered.get(f[1]);
                        ServiceInstance<T> si = build(old.getName(), old.getId(), Integer.parseInt(f[2]),
                                old.getServiceType(), old.getRegistrationTimeUTC());
                        discovery.updateService(si);
                        registered.put(si.getId(), si);
                        Proto.print("UPDATED " + si.getId());
                        break;
                    }
                    case "unregister":
                        discovery.unregisterService(registered.remove(f[1]));
                        Proto.print("UNREGISTERED " + f[1]);
                        break;
                    case "names":
                        Proto.print(("NAMES " + String.join(" ", new TreeSet<>(discovery.queryForNames()))).trim());
                        break;
                    case "query":
                        Proto.print("INSTANCES " + describe(discovery.queryForInstances(f[1])));
                        break;
                    case "cache":
                        caches.put(f[1], startCache(f[1], f[1]));
                        Proto.print("CACHE " + f[1]);
                        break;
                    case "cached":
                        Proto.print("CACHED " + describe(caches.get(f[1]).getInstances()));
                        break;
                    case "provider": {
                        ServiceProvider<T> p = discovery.serviceProviderBuilder().serviceName(f[1]).build();
                        p.start();
                        providers.put(f[1], p);
                        Proto.print("PROVIDER " + f[1]);
                        break;
                    }
                    case "pick": {
                        ServiceInstance<T> si = providers.get(f[1]).getInstance();
                        Proto.print("PICKED " + (si == null ? "-" : si.getId()));
                        break;
                    }
                    case "bench": {
                        long before = usedHeap();
                        long start = System.nanoTime();
                        ServiceCache<T> c = startCache(f[1], "bench:" + f[1]);
                        long took = System.nanoTime() - start;
                        int n = c.getInstances().size();
                        long after = usedHeap();
                        caches.put("bench:" + f[1], c);
                        Proto.print("BENCH " + took + " " + (after - before) + " " + n);
                        break;
                    }
                    case "session":
                        Proto.print("SESSION 0x" + Long.toHexString(client.getZookeeperClient().getZooKeeper().getSessionId()));
                        break;
                    case "close":
                        closeAll();
                        Proto.print("CLOSED");
                        break;
                    default:
                        Proto.print("ERR " + line + ": unknown command");
                }
            } catch (Exception e) {
                Proto.print("ERR " + line + ": " + Proto.describe(e));
            }
        }
        try {
            closeAll();
        } catch (Exception e) {
            System.err.println("close: " + Proto.describe(e));
        }
        Proto.exit(client);
    }

    private void closeAll() throws Exception {
        List<AutoCloseable> all = new ArrayList<>();
        all.addAll(providers.values());
        all.addAll(caches.values());
        providers.clear();
        caches.clear();
        for (AutoCloseable c : all) {
            c.close();
        }
        discovery.close();
        registered.clear();
    }
}
