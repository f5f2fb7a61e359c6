/* SPDX-License-Identifier: MIT */
/* tests/check_devices_info.c: the backend, the device records and their
 * capabilities, the current device, and streams, on every device. The
 * shared helpers are in tests/lib/devices_util.h. */
#include "config.h"

#include "devices_util.h"
#include "run.h"

/* -------------------------------------------------- backend and devices */

START_TEST(test_backend_info)
{
  hipd_conn_t *conn = connect_to(shared);
  hipd_info_t *info = NULL;
  int dev = -1, cpu = 0, n;

  OK(conn, hipd_backend_info(conn, &info));
  ck_assert_str_eq(info_str(info, "name"), "hip");
  ck_assert_str_eq(info_str(info, "execution_model"), "jit");
  ck_assert(info_bool(info, "available"));
  ck_assert_int_eq(hipd_info_len(info, "version"), 3);
  ck_assert_int_ge(info_int(info, "version.0"), 0);
  n = hipd_info_len(info, "drivers");
  ck_assert_int_ge(n, 1);
  for (int i = 0; i < n; i++) {
    char path[32];
    snprintf(path, sizeof(path), "drivers.%d", i);
    cpu |= strcmp(info_str(info, path), "cpu") == 0;
  }
  ck_assert_msg(cpu, "the drivers do not include cpu");
  hipd_info_free(info);
  hipd_close(conn);
}
END_TEST

/* The capabilities every device record must have, sane. */
/* The CPU device's clock as it must be given: the same in every process
 * that reads it, so the peak (cpufreq's cpuinfo_max_freq) where the CPU
 * scales, else the whole MHz of /proc/cpuinfo, where it is fixed. */
static int64_t host_clock_khz(void)
{
  FILE *f = fopen("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq", "r");
  char line[256];
  long khz = 0;
  double mhz = 0;

  if (f != NULL) {
    if (fscanf(f, "%ld", &khz) != 1)
      khz = 0;
    fclose(f);
    if (khz > 0)
      return khz;
  }
  if ((f = fopen("/proc/cpuinfo", "r")) == NULL)
    return 0;
  while (fgets(line, sizeof(line), f) != NULL)
    if (strncmp(line, "cpu MHz", 7) == 0 && strchr(line, ':') != NULL) {
      mhz = strtod(strchr(line, ':') + 1, NULL);
      break;
    }
  fclose(f);
  return (int64_t)mhz * 1000;
}

static void check_caps(const hipd_info_t *info, const char *prefix, int dev)
{
  char p[128];
  const char *driver;
  int is_cpu;

#define FIELD(name) (snprintf(p, sizeof(p), "%s%s", prefix, name), p)
  ck_assert_int_eq(info_int(info, FIELD("id")), dev);
  ck_assert_str_ne(info_str(info, FIELD("name")), "");
  ck_assert_str_ne(info_str(info, FIELD("arch")), "");
  ck_assert_str_ne(info_str(info, FIELD("platform")), "");
  driver = info_str(info, FIELD("driver"));
  is_cpu = info_bool(info, FIELD("is_cpu"));
  ck_assert_msg(is_cpu == (strcmp(driver, "cpu") == 0),
                "device %d: driver %s but is_cpu %d", dev, driver, is_cpu);
  ck_assert_int_eq(info_bool(info, FIELD("capabilities.is_cpu")), is_cpu);
  ck_assert_int_gt(info_int(info, FIELD("capabilities.max_threads_per_block")),
                   0);
  for (int i = 0; i < 3; i++) {
    char key[64];
    snprintf(key, sizeof(key), "capabilities.max_block_dims.%d", i);
    ck_assert_int_gt(info_int(info, FIELD(key)), 0);
    snprintf(key, sizeof(key), "capabilities.max_grid_dims.%d", i);
    ck_assert_int_gt(info_int(info, FIELD(key)), 0);
  }
  ck_assert_int_gt(info_int(info, FIELD("capabilities.total_global_mem")), 0);
  ck_assert_int_ge(info_int(info, FIELD("capabilities.warp_size")), 1);
  ck_assert_int_ge(info_int(info, FIELD("capabilities.multiprocessor_count")),
                   1);
  ck_assert_int_ge(info_int(info, FIELD("capabilities.shared_mem_per_block")),
                   0);
  ck_assert_int_eq(
      hipd_info_len(info, FIELD("capabilities.compute_capability")), 2);
  if (!is_cpu)
    ck_assert_int_ge(info_int(info, FIELD("capabilities.warp_size")), 32);
  else
    ck_assert_int_eq(info_int(info, FIELD("capabilities.clock_rate_khz")),
                     host_clock_khz());
#undef FIELD
}

START_TEST(test_device_records)
{
  hipd_conn_t *conn = connect_to(shared);
  hipd_info_t *list = NULL;
  int n = device_count(conn), cpus = 0, dev = -1;

  OK(conn, hipd_device_list(conn, &list));
  ck_assert_int_eq(hipd_info_len(list, ""), n);
  for (dev = 0; dev < n; dev++) {
    hipd_info_t *info = NULL;
    char prefix[16], path[64];

    snprintf(prefix, sizeof(prefix), "%d.", dev);
    check_caps(list, prefix, dev);
    /* The list has no live memory figures. */
    snprintf(path, sizeof(path), "%d.memory", dev);
    ck_assert_int_eq(hipd_info_len(list, path), HIPD_ENOENT);

    OK(conn, hipd_device_get(conn, dev, &info));
    check_caps(info, "", dev);
    snprintf(path, sizeof(path), "%d.name", dev);
    ck_assert_str_eq(info_str(info, "name"), info_str(list, path));
    ck_assert_int_gt(info_int(info, "memory.total"), 0);
    ck_assert_int_ge(info_int(info, "memory.free"), 0);
    ck_assert_int_le(info_int(info, "memory.free"),
                     info_int(info, "memory.total"));
    ck_assert_int_ge(info_int(info, "memory.hipd_allocated"), 0);
    ck_assert_int_ge(info_int(info, "memory.hipd_buffers"), 0);
    cpus += info_bool(info, "is_cpu");
    hipd_info_free(info);
  }
  ck_assert_int_ge(cpus, 2);
  hipd_info_free(list);
  hipd_close(conn);
}
END_TEST

START_TEST(test_current_device)
{
  hipd_conn_t *conn = connect_to(shared);
  int n = device_count(conn), cur = -1, dev = -1;
  hipd_info_t *info = NULL;

  OK(conn, hipd_device_current(conn, &cur));
  ck_assert_int_eq(cur, 0);
  for (dev = 0; dev < n; dev++) {
    hipd_stream_t s_cur = HIPD_STREAM_NULL, s_dev = HIPD_STREAM_NULL;
    hipd_buffer_t buf = HIPD_BUFFER_NULL;
    hipd_event_t ev = HIPD_EVENT_NULL;

    OK(conn, hipd_device_set_current(conn, dev));
    OK(conn, hipd_device_current(conn, &cur));
    ck_assert_int_eq(cur, dev);
    OK(conn, hipd_device_get(conn, HIPD_DEVICE_CURRENT, &info));
    ck_assert_int_eq(info_int(info, "id"), dev);
    hipd_info_free(info);
    OK(conn, hipd_stream_default(conn, HIPD_DEVICE_CURRENT, &s_cur));
    OK(conn, hipd_stream_default(conn, dev, &s_dev));
    ck_assert_uint_eq(hipd_stream_id(s_cur), hipd_stream_id(s_dev));
    OK(conn, hipd_mem_alloc(conn, HIPD_DEVICE_CURRENT, 64, "float32", &buf));
    OK(conn, hipd_mem_info(conn, buf, &info));
    ck_assert_int_eq(info_int(info, "device"), dev);
    hipd_info_free(info);
    /* An event of the current device records on its default stream. */
    OK(conn, hipd_event_create(conn, HIPD_DEVICE_CURRENT, &ev));
    OK(conn, hipd_event_record(conn, ev, s_dev));
    OK(conn, hipd_event_synchronize(conn, ev));
    OK(conn, hipd_device_synchronize(conn, HIPD_DEVICE_CURRENT));
    OK(conn, hipd_event_destroy(conn, ev));
    OK(conn, hipd_mem_free(conn, buf));
  }

  /* Devices that do not exist. */
  dev = n;
  EXPECT(conn, hipd_device_set_current(conn, n), HIPD_ENODEV);
  OK(conn, hipd_device_current(conn, &cur));
  ck_assert_int_eq(cur, n - 1);
  EXPECT(conn, hipd_device_get(conn, n, &info), HIPD_ENODEV);
  ck_assert_ptr_null(info);
  EXPECT(conn, hipd_device_get(conn, 1000000, &info), HIPD_ENODEV);
  EXPECT(conn, hipd_device_get(conn, -7, &info), HIPD_ENODEV);
  EXPECT(conn, hipd_device_synchronize(conn, n), HIPD_ENODEV);
  {
    hipd_stream_t st = HIPD_STREAM_NULL;
    hipd_buffer_t buf = HIPD_BUFFER_NULL;
    hipd_event_t ev = HIPD_EVENT_NULL;
    EXPECT(conn, hipd_stream_create(conn, n, &st), HIPD_ENODEV);
    EXPECT(conn, hipd_stream_default(conn, n, &st), HIPD_ENODEV);
    EXPECT(conn, hipd_mem_alloc(conn, n, 16, "byte", &buf), HIPD_ENODEV);
    EXPECT(conn, hipd_mem_alloc_custom(conn, n, 16, 4, &buf), HIPD_ENODEV);
    EXPECT(conn, hipd_event_create(conn, n, &ev), HIPD_ENODEV);
    ck_assert_uint_eq(hipd_stream_id(st), 0);
    ck_assert_uint_eq(hipd_buffer_id(buf), 0);
    ck_assert_uint_eq(hipd_event_id(ev), 0);
  }
  EXPECT(conn, hipd_device_set_current(conn, HIPD_DEVICE_CURRENT), HIPD_EINVAL);
  hipd_close(conn);
}
END_TEST

/* ---------------------------------------------------------------- streams */

START_TEST(test_streams)
{
  hipd_conn_t *conn = connect_to(shared);
  int n = device_count(conn), dev;
  hipd_stream_t prev_default = HIPD_STREAM_NULL;

  for (dev = 0; dev < n; dev++) {
    hipd_stream_t s1 = HIPD_STREAM_NULL, s2 = HIPD_STREAM_NULL,
                  def = HIPD_STREAM_NULL, def2 = HIPD_STREAM_NULL;
    int idle = -1;

    OK(conn, hipd_stream_create(conn, dev, &s1));
    OK(conn, hipd_stream_create(conn, dev, &s2));
    ck_assert_uint_ne(hipd_stream_id(s1), 0);
    ck_assert_uint_ne(hipd_stream_id(s1), hipd_stream_id(s2));
    OK(conn, hipd_stream_synchronize(conn, s1));
    OK(conn, hipd_stream_query(conn, s1, &idle));
    ck_assert_int_eq(idle, 1);

    OK(conn, hipd_stream_default(conn, dev, &def));
    OK(conn, hipd_stream_default(conn, dev, &def2));
    ck_assert_uint_ne(hipd_stream_id(def), 0);
    ck_assert_uint_eq(hipd_stream_id(def), hipd_stream_id(def2));
    ck_assert_uint_ne(hipd_stream_id(def), hipd_stream_id(prev_default));
    prev_default = def;
    OK(conn, hipd_stream_synchronize(conn, def));
    EXPECT(conn, hipd_stream_destroy(conn, def), HIPD_EPERM);
    ck_assert_ptr_nonnull(strstr(hipd_last_error(conn), "default"));
    OK(conn, hipd_stream_synchronize(conn, def));

    /* Work queued on a stream still runs after the stream is destroyed.
     * Streams are not ordered with one another, so the read on the default
     * stream waits for it through an event recorded on s1 after the
     * memset (an event follows its record). */
    {
      hipd_buffer_t buf = HIPD_BUFFER_NULL;
      hipd_event_t ev = HIPD_EVENT_NULL;
      uint8_t back[256];
      OK(conn, hipd_mem_alloc(conn, dev, sizeof(back), "byte", &buf));
      OK(conn, hipd_event_create(conn, dev, &ev));
      OK(conn, hipd_mem_memset(conn, buf, 0, sizeof(back), 0));
      OK(conn, hipd_mem_memset_async(conn, buf, 0, sizeof(back), 0x33, s1));
      OK(conn, hipd_event_record(conn, ev, s1));
      OK(conn, hipd_stream_destroy(conn, s1));
      OK(conn, hipd_event_synchronize(conn, ev));
      OK(conn, hipd_event_destroy(conn, ev));
      OK(conn, hipd_mem_read(conn, buf, 0, back, sizeof(back)));
      for (size_t i = 0; i < sizeof(back); i++)
        ck_assert_uint_eq(back[i], 0x33);
      OK(conn, hipd_mem_free(conn, buf));
    }
    EXPECT(conn, hipd_stream_synchronize(conn, s1), HIPD_ESTALE);
    EXPECT(conn, hipd_stream_query(conn, s1, &idle), HIPD_ESTALE);
    EXPECT(conn, hipd_stream_destroy(conn, s1), HIPD_ESTALE);
    OK(conn, hipd_stream_synchronize(conn, s2));
    OK(conn, hipd_device_synchronize(conn, dev));
    OK(conn, hipd_stream_destroy(conn, s2));
  }
  hipd_close(conn);
}
END_TEST

static Suite *devices_info_suite(void)
{
  Suite *s = suite_create("devices_info");
  TCase *tc;

  tc = tcase_create("devices");
  tcase_set_timeout(tc, 120);
  tcase_add_unchecked_fixture(tc, shared_setup, shared_teardown);
  tcase_add_test(tc, test_backend_info);
  tcase_add_test(tc, test_device_records);
  tcase_add_test(tc, test_current_device);
  tcase_add_test(tc, test_streams);
  suite_add_tcase(s, tc);
  return s;
}

int main(void)
{
  int failed;

  harness_init("check_devices_info");
  failed = test_run(devices_info_suite());
  harness_fini();
  return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
