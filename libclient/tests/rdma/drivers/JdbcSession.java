// One pgJDBC session (Debian's libpostgresql-jdbc-java on the JVM: Java's
// own sockets, an IPv6 socket reaching IPv4 through a mapped address;
// connectTimeout=0 leaves the JDK's socket blocking, so the first write
// waits for the upgrade and the session's reads wait as a blocking
// socket's do),
// checking what a driver does: a transaction, a large result, COPY both
// ways, a batch (pgJDBC pipelines its statements), TLS when asked, a cancel
// by query timeout. Prints what the server says of its transport.
// Usage: java -cp postgresql.jar:. JdbcSession HOST PORT PASSWORD SSL(on|off)
import java.io.StringReader;
import java.io.StringWriter;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.Properties;

import org.postgresql.PGConnection;

public final class JdbcSession {
    private static final int WIDTH = 1000;  // bytes per row of the large result

    private static void check(boolean ok, String what) {
        if (!ok) throw new AssertionError(what);
    }

    private static String one(Connection conn, String sql) throws SQLException {
        try (Statement st = conn.createStatement(); ResultSet rs = st.executeQuery(sql)) {
            check(rs.next(), "no row: " + sql);
            return rs.getString(1);
        }
    }

    public static void main(String[] args) throws Exception {
        final int rows = Integer.parseInt(System.getenv().getOrDefault("DRIVER_ROWS", "20000"));
        Properties props = new Properties();
        props.setProperty("user", "postgres");
        props.setProperty("password", args[2]);
        props.setProperty("connectTimeout", "0");
        props.setProperty("sslmode", args[3].equals("on") ? "require" : "disable");
        String url = "jdbc:postgresql://" + args[0] + ":" + args[1] + "/postgres";
        try (Connection conn = DriverManager.getConnection(url, props)) {
            String transport;
            try {
                transport = one(conn, "select transport from pg_stat_rdma where pid = pg_backend_pid()");
            } catch (SQLException e) {
                check("42P01".equals(e.getSQLState()), "pg_stat_rdma: " + e);
                transport = "none";  // a server without pg_rdma
            }
            boolean ssl = "t".equals(one(conn, "select ssl from pg_stat_ssl where pid = pg_backend_pid()"));
            try (Statement st = conn.createStatement()) {
                st.execute("create temp table t (id int, v text)");
            }
            conn.setAutoCommit(false);
            try (Statement st = conn.createStatement()) {
                st.execute("insert into t values (2, 'dropped')");
                conn.rollback();
                st.execute("insert into t values (1, 'kept')");
                conn.commit();
            }
            check("kept".equals(one(conn, "select string_agg(v, ',') from t")), "transaction");
            conn.commit();
            try (PreparedStatement ps = conn.prepareStatement("select repeat('x', ?) from generate_series(1, ?)")) {
                ps.setInt(1, WIDTH);
                ps.setInt(2, rows);
                int n = 0;
                try (ResultSet rs = ps.executeQuery()) {
                    while (rs.next()) {
                        check(rs.getString(1).length() == WIDTH, "row width");
                        ++n;
                    }
                }
                check(n == rows, "large result: " + n + " rows");
            }
            StringBuilder copyIn = new StringBuilder();
            for (int i = 0; i < 10000; ++i) copyIn.append(i).append("\tc").append(i).append('\n');
            var copy = conn.unwrap(PGConnection.class).getCopyAPI();
            check(copy.copyIn("copy t from stdin", new StringReader(copyIn.toString())) == 10000, "copy in");
            StringWriter copyOut = new StringWriter();
            check(copy.copyOut("copy t to stdout", copyOut) == 10001, "copy out");
            try (PreparedStatement ps = conn.prepareStatement("insert into t values (?, 'p')")) {
                for (int i = 0; i < 2000; ++i) {
                    ps.setInt(1, i);
                    ps.addBatch();
                }
                ps.executeBatch();
            }
            conn.commit();
            check("2000".equals(one(conn, "select count(*) from t where v = 'p'")), "batch");
            conn.commit();
            // A cancel: pgJDBC's query timeout sends a CancelRequest on a
            // connection of its own.
            try (Statement st = conn.createStatement()) {
                st.setQueryTimeout(1);
                st.execute("select pg_sleep(30)");
                throw new AssertionError("pg_sleep was not cancelled");
            } catch (SQLException e) {
                check("57014".equals(e.getSQLState()), "cancel: " + e);
            }
            conn.rollback();
            check("42".equals(one(conn, "select 42")), "after the cancel");
            System.out.println("jdbc transport=" + transport + " ssl=" + (ssl ? "on" : "off"));
        }
    }
}
