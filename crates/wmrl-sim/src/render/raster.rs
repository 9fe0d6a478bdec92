//! The z-buffer rasteriser: world → camera transform, near-plane clipping,
//! perspective projection, edge-function scan conversion with 1/z depth, and
//! flat Lambert shading (ambient 0.4 + 0.6·max(0, n·l)).
//!
//! Two things keep it fast without changing what it draws: a mesh whose
//! bounding sphere lies outside the view frustum is skipped whole (the wrist
//! camera sees a small part of the scene), and each triangle row is scanned
//! only over the conservative span where its three edge functions can be
//! non-negative, not over the triangle's whole bounding box.
//!
//! A rasteriser made [`Rasterizer::with_static_cache`] (the agent view, whose
//! camera never moves) also keeps the sky and the fixed bodies (floor, table,
//! fixture housings) as drawn the last time, and starts each frame from a copy
//! of them while the camera and those bodies stay where they were. Every
//! rasteriser draws fixed bodies before moving ones, so the cached and the
//! uncached paths draw the same pixels, ties in depth included.

use image::RgbImage;
use nalgebra::{Isometry3, Point3, Vector3};
use wide::f32x4;

use super::{MeshSet, RenderMesh};
use crate::physics::SimWorld;
use crate::physics::convert::to_iso;

/// A pinhole camera: looks along its local -z with +y up (MuJoCo/OpenGL convention).
#[derive(Debug, Clone, Copy)]
pub struct Camera {
    /// Camera pose in the world.
    pub pose: Isometry3<f64>,
    /// Vertical field of view (deg).
    pub fovy_deg: f64,
}

/// Reusable buffers for rendering one image size.
#[derive(Debug, Clone)]
pub struct Rasterizer {
    width: u32,
    height: u32,
    depth: Vec<f32>,
    /// Packed 0x00RRGGBB per pixel, unpacked into the image at the end: one
    /// word per pixel lets the span loop write branch-free (and vectorise).
    color: Vec<u32>,
    cam_verts: Vec<[f32; 3]>,
    /// Keep the fixed scenery between frames (see the module docs).
    cache_static: bool,
    static_layer: StaticLayer,
}

/// The sky and the fixed bodies' meshes as drawn for `key` (mesh set, image
/// size, camera, and every fixed body's pose, as bits).
#[derive(Debug, Clone, Default)]
struct StaticLayer {
    key: Vec<u64>,
    depth: Vec<f32>,
    color: Vec<u32>,
}

/// What every mesh of one frame is drawn with.
struct View {
    world_to_camera: Isometry3<f64>,
    /// Focal length (pixels) and principal point.
    f: f32,
    cx: f32,
    cy: f32,
    /// The light direction in the camera frame.
    light: [f32; 3],
    tan_x: f32,
    tan_y: f32,
    norm_x: f32,
    norm_y: f32,
}

const NEAR: f32 = 0.01;
const LIGHT: [f32; 3] = [0.35, 0.25, 0.9];

impl Rasterizer {
    /// Buffers for `width` × `height` images.
    pub fn new(width: u32, height: u32) -> Rasterizer {
        Rasterizer {
            width,
            height,
            depth: vec![0.0; (width * height) as usize],
            color: vec![0; (width * height) as usize],
            cam_verts: Vec::new(),
            cache_static: false,
            static_layer: StaticLayer::default(),
        }
    }

    /// This rasteriser keeps the fixed scenery between frames: worth it for a
    /// camera that stays put (it costs a key comparison and, on a miss, one
    /// copy of the buffers).
    pub fn with_static_cache(mut self) -> Rasterizer {
        self.cache_static = true;
        self
    }

    /// Renders `meshes` of `world` seen from `camera`.
    pub fn render(&mut self, world: &SimWorld, meshes: &MeshSet, camera: &Camera) -> RgbImage {
        let (w, h) = (self.width, self.height);
        let f = (h as f32 / 2.0) / ((camera.fovy_deg.to_radians() / 2.0).tan() as f32);
        let (cx, cy) = (w as f32 / 2.0, h as f32 / 2.0);
        let world_to_camera = camera.pose.inverse();
        let light = {
            let l = Vector3::new(LIGHT[0], LIGHT[1], LIGHT[2]).normalize();
            let lc = world_to_camera.rotation.cast::<f32>() * l;
            [lc.x, lc.y, lc.z]
        };
        // Frustum side planes through the camera centre: a point p is outside
        // the right plane when (p.x + tan_x·p.z) / √(1 + tan_x²) > 0 (the camera
        // looks along -z), and likewise for the others.
        let (tan_x, tan_y) = (cx / f, cy / f);
        let view = View {
            world_to_camera,
            f,
            cx,
            cy,
            light,
            tan_x,
            tan_y,
            norm_x: (1.0 + tan_x * tan_x).sqrt(),
            norm_y: (1.0 + tan_y * tan_y).sqrt(),
        };
        let is_fixed = |mesh: &RenderMesh| world.world.bodies[mesh.body].is_fixed();
        let key = if self.cache_static {
            static_key(world, meshes, camera, w, h)
        } else {
            Vec::new()
        };
        if self.cache_static && key == self.static_layer.key {
            self.depth.copy_from_slice(&self.static_layer.depth);
            self.color.copy_from_slice(&self.static_layer.color);
        } else {
            // Sky gradient background.
            for (y, row) in self.color.chunks_exact_mut(w as usize).enumerate() {
                let t = y as f32 / h as f32;
                row.fill(pack([
                    (175.0 + 40.0 * t) as u8,
                    (190.0 + 30.0 * t) as u8,
                    (215.0 + 20.0 * t) as u8,
                ]));
            }
            self.depth.fill(0.0); // stores 1/depth; 0 = infinitely far
            for mesh in meshes.meshes.iter().filter(|m| is_fixed(m)) {
                self.draw_mesh(world, mesh, &view);
            }
            if self.cache_static {
                self.static_layer.key = key;
                self.static_layer.depth.clone_from(&self.depth);
                self.static_layer.color.clone_from(&self.color);
            }
        }
        for mesh in meshes.meshes.iter().filter(|m| !is_fixed(m)) {
            self.draw_mesh(world, mesh, &view);
        }
        let mut img = RgbImage::new(w, h);
        for (px, &c) in img.as_mut().chunks_exact_mut(3).zip(&self.color) {
            px.copy_from_slice(&c.to_be_bytes()[1..]);
        }
        img
    }

    /// Draws one mesh (skipped whole when its bounding sphere is out of view).
    fn draw_mesh(&mut self, world: &SimWorld, mesh: &RenderMesh, view: &View) {
        let View {
            f, cx, cy, light, ..
        } = *view;
        let m: Isometry3<f32> =
            (view.world_to_camera * to_iso(world.world.bodies[mesh.body].position())).cast();
        let [bx, by, bz] = mesh.bound_center;
        let c = m * Point3::new(bx, by, bz);
        let r = mesh.bound_radius;
        if c.z - r > -NEAR
            || (c.x.abs() + view.tan_x * c.z) > r * view.norm_x
            || (c.y.abs() + view.tan_y * c.z) > r * view.norm_y
        {
            return;
        }
        self.cam_verts.clear();
        for v in &mesh.vertices {
            let p = m * Point3::new(v[0], v[1], v[2]);
            self.cam_verts.push([p.x, p.y, p.z]);
        }
        for t in &mesh.triangles {
            let a = self.cam_verts[t[0] as usize];
            let b = self.cam_verts[t[1] as usize];
            let c = self.cam_verts[t[2] as usize];
            let n = cross(sub(b, a), sub(c, a));
            // Back-face culling: the camera sits at the origin.
            if dot(n, a) >= 0.0 {
                continue;
            }
            let nl = norm(n);
            let shade = 0.4 + 0.6 * (dot(n, light) / nl).max(0.0);
            let color = pack([
                (mesh.color[0] as f32 * shade).min(255.0) as u8,
                (mesh.color[1] as f32 * shade).min(255.0) as u8,
                (mesh.color[2] as f32 * shade).min(255.0) as u8,
            ]);
            let mut poly = [[0.0f32; 3]; 4];
            let count = clip_near([a, b, c], &mut poly);
            if count < 3 {
                continue;
            }
            let proj = |p: [f32; 3]| -> [f32; 3] {
                let iz = 1.0 / -p[2];
                [cx + f * p[0] * iz, cy - f * p[1] * iz, iz]
            };
            let p0 = proj(poly[0]);
            for i in 1..count - 1 {
                self.fill(p0, proj(poly[i]), proj(poly[i + 1]), color);
            }
        }
    }

    fn fill(&mut self, a: [f32; 3], b: [f32; 3], c: [f32; 3], color: u32) {
        let (w, h) = (self.width as i32, self.height as i32);
        let area = (b[0] - a[0]) * (c[1] - a[1]) - (b[1] - a[1]) * (c[0] - a[0]);
        if area.abs() < 1e-9 {
            return;
        }
        let min_x = (a[0].min(b[0]).min(c[0]).floor() as i32).max(0);
        let max_x = (a[0].max(b[0]).max(c[0]).ceil() as i32).min(w - 1);
        let min_y = (a[1].min(b[1]).min(c[1]).floor() as i32).max(0);
        let max_y = (a[1].max(b[1]).max(c[1]).ceil() as i32).min(h - 1);
        if min_x > max_x || min_y > max_y {
            return;
        }
        // Edge functions are affine in the pixel centre: evaluate them at the
        // bounding box's corner, then at each pixel from their x/y slopes.
        let inv_area = 1.0 / area;
        let (x0, y0) = (min_x as f32 + 0.5, min_y as f32 + 0.5);
        let edge = |p: [f32; 3], q: [f32; 3]| {
            // ((p.x - px)(q.y - py) - (p.y - py)(q.x - px)) / area
            let dx = (p[1] - q[1]) * inv_area; // d/dpx
            let dy = (q[0] - p[0]) * inv_area; // d/dpy
            let v0 = ((p[0] - x0) * (q[1] - y0) - (p[1] - y0) * (q[0] - x0)) * inv_area;
            (v0, dx, dy)
        };
        let (e0, e0x, e0y) = edge(b, c);
        let (e1, e1x, e1y) = edge(c, a);
        let width = self.width as usize;
        let (e2x, e2y) = (-(e0x + e1x), -(e0y + e1y));
        let last = (max_x - min_x) as f32;
        for row in 0..=(max_y - min_y) {
            let fy = row as f32;
            let w0_row = e0 + e0y * fy;
            let w1_row = e1 + e1y * fy;
            let w2_row = 1.0 - e0 - e1 + e2y * fy;
            // The span of pixel offsets where every edge function can be >= 0,
            // widened by a pixel on each side so that rounding never loses a
            // pixel the exact test below would accept.
            let (mut lo, mut hi) = (0.0f32, last);
            for (w, dx) in [(w0_row, e0x), (w1_row, e1x), (w2_row, e2x)] {
                if dx > 0.0 {
                    lo = lo.max(-w / dx - 1.0);
                } else if dx < 0.0 {
                    hi = hi.min(-w / dx + 1.0);
                } else if w < -1e-6 {
                    hi = -1.0;
                }
            }
            if lo > hi {
                continue;
            }
            // 0 <= lo <= hi <= last: truncation floors, and one more pixel
            // stands in for the ceiling (no libm calls on the hot path).
            let (lo, hi) = (lo as usize, (hi as usize + 1).min(last as usize));
            let start = (min_y + row) as usize * width + min_x as usize;
            let depth = &mut self.depth[start + lo..=start + hi];
            let colors = &mut self.color[start + lo..=start + hi];
            // Four pixels at a time (SIMD via `wide`), then the rest one by
            // one; both rewrite every pixel of the span, with itself where the
            // triangle loses, so the loops have no branches.
            let mut x = lo;
            let mut depth_chunks = depth.chunks_exact_mut(4);
            let mut color_chunks = colors.chunks_exact_mut(4);
            let lanes = f32x4::from([0.0, 1.0, 2.0, 3.0]);
            let zero = f32x4::ZERO;
            let (za, zb, zc) = (f32x4::splat(a[2]), f32x4::splat(b[2]), f32x4::splat(c[2]));
            let color_bits = f32x4::splat(f32::from_bits(color));
            for (d, col) in (&mut depth_chunks).zip(&mut color_chunks) {
                let fx = f32x4::splat(x as f32) + lanes;
                let w0 = f32x4::splat(w0_row) + f32x4::splat(e0x) * fx;
                let w1 = f32x4::splat(w1_row) + f32x4::splat(e1x) * fx;
                let w2 = f32x4::ONE - w0 - w1;
                let iz = w0 * za + w1 * zb + w2 * zc;
                let old_depth = f32x4::from([d[0], d[1], d[2], d[3]]);
                let old_color = f32x4::from([
                    f32::from_bits(col[0]),
                    f32::from_bits(col[1]),
                    f32::from_bits(col[2]),
                    f32::from_bits(col[3]),
                ]);
                let wins =
                    w0.simd_ge(zero) & w1.simd_ge(zero) & w2.simd_ge(zero) & iz.simd_gt(old_depth);
                d.copy_from_slice(&wins.bitselect(iz, old_depth).to_array());
                for (c, v) in col
                    .iter_mut()
                    .zip(wins.bitselect(color_bits, old_color).to_array())
                {
                    *c = v.to_bits();
                }
                x += 4;
            }
            let depth_rest = depth_chunks.into_remainder();
            let color_rest = color_chunks.into_remainder();
            for ((d, col), x) in depth_rest.iter_mut().zip(color_rest).zip(x..) {
                let fx = x as f32;
                let w0 = w0_row + e0x * fx;
                let w1 = w1_row + e1x * fx;
                let w2 = 1.0 - w0 - w1;
                let iz = w0 * a[2] + w1 * b[2] + w2 * c[2];
                let wins = (w0 >= 0.0) & (w1 >= 0.0) & (w2 >= 0.0) & (iz > *d);
                *d = if wins { iz } else { *d };
                *col = if wins { color } else { *col };
            }
        }
    }
}

/// What the fixed scenery of a frame depends on, as bits: the mesh set, the
/// image size, the camera, and the pose of every fixed body with a mesh.
fn static_key(world: &SimWorld, meshes: &MeshSet, camera: &Camera, w: u32, h: u32) -> Vec<u64> {
    let pose_bits = |iso: &Isometry3<f64>| {
        let t = iso.translation.vector;
        let q = iso.rotation.coords;
        [t.x, t.y, t.z, q.x, q.y, q.z, q.w].map(f64::to_bits)
    };
    let mut key = vec![meshes.id, u64::from(w) << 32 | u64::from(h)];
    key.push(camera.fovy_deg.to_bits());
    key.extend(pose_bits(&camera.pose));
    for mesh in meshes.meshes.iter() {
        let body = &world.world.bodies[mesh.body];
        if body.is_fixed() {
            key.extend(pose_bits(&to_iso(body.position())));
        }
    }
    key
}

/// `[r, g, b]` as 0x00RRGGBB.
fn pack(c: [u8; 3]) -> u32 {
    u32::from_be_bytes([0, c[0], c[1], c[2]])
}

/// Clips a triangle against z = -NEAR (keeps z <= -NEAR); returns the vertex count.
fn clip_near(tri: [[f32; 3]; 3], out: &mut [[f32; 3]; 4]) -> usize {
    let mut n = 0;
    for i in 0..3 {
        let p = tri[i];
        let q = tri[(i + 1) % 3];
        let pin = p[2] <= -NEAR;
        let qin = q[2] <= -NEAR;
        if pin && n < 4 {
            out[n] = p;
            n += 1;
        }
        if pin != qin && n < 4 {
            let t = (-NEAR - p[2]) / (q[2] - p[2]);
            out[n] = [p[0] + t * (q[0] - p[0]), p[1] + t * (q[1] - p[1]), -NEAR];
            n += 1;
        }
    }
    n
}

fn sub(a: [f32; 3], b: [f32; 3]) -> [f32; 3] {
    [a[0] - b[0], a[1] - b[1], a[2] - b[2]]
}
fn cross(a: [f32; 3], b: [f32; 3]) -> [f32; 3] {
    [
        a[1] * b[2] - a[2] * b[1],
        a[2] * b[0] - a[0] * b[2],
        a[0] * b[1] - a[1] * b[0],
    ]
}
fn dot(a: [f32; 3], b: [f32; 3]) -> f32 {
    a[0] * b[0] + a[1] * b[1] + a[2] * b[2]
}
fn norm(a: [f32; 3]) -> f32 {
    dot(a, a).sqrt()
}

#[cfg(test)]
mod tests {
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    use super::*;

    /// The plain rasteriser the fast path replaces: every pixel of the bounding
    /// box, edge functions evaluated the same way.
    fn reference_fill(r: &mut Rasterizer, a: [f32; 3], b: [f32; 3], c: [f32; 3], color: u32) {
        let (w, h) = (r.width as i32, r.height as i32);
        let area = (b[0] - a[0]) * (c[1] - a[1]) - (b[1] - a[1]) * (c[0] - a[0]);
        if area.abs() < 1e-9 {
            return;
        }
        let min_x = (a[0].min(b[0]).min(c[0]).floor() as i32).max(0);
        let max_x = (a[0].max(b[0]).max(c[0]).ceil() as i32).min(w - 1);
        let min_y = (a[1].min(b[1]).min(c[1]).floor() as i32).max(0);
        let max_y = (a[1].max(b[1]).max(c[1]).ceil() as i32).min(h - 1);
        let inv_area = 1.0 / area;
        let (x0, y0) = (min_x as f32 + 0.5, min_y as f32 + 0.5);
        let edge = |p: [f32; 3], q: [f32; 3]| {
            let dx = (p[1] - q[1]) * inv_area;
            let dy = (q[0] - p[0]) * inv_area;
            let v0 = ((p[0] - x0) * (q[1] - y0) - (p[1] - y0) * (q[0] - x0)) * inv_area;
            (v0, dx, dy)
        };
        let (e0, e0x, e0y) = edge(b, c);
        let (e1, e1x, e1y) = edge(c, a);
        for row in 0..=(max_y - min_y).max(-1) {
            let fy = row as f32;
            for off in 0..=(max_x - min_x) {
                let fx = off as f32;
                let w0 = (e0 + e0y * fy) + e0x * fx;
                let w1 = (e1 + e1y * fy) + e1x * fx;
                let w2 = 1.0 - w0 - w1;
                let iz = w0 * a[2] + w1 * b[2] + w2 * c[2];
                let idx = (min_y + row) as usize * r.width as usize + (min_x + off) as usize;
                if w0 >= 0.0 && w1 >= 0.0 && w2 >= 0.0 && iz > r.depth[idx] {
                    r.depth[idx] = iz;
                    r.color[idx] = color;
                }
            }
        }
    }

    #[test]
    fn span_fill_draws_exactly_what_the_bounding_box_loop_draws() {
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        // Odd sizes so that spans end off the four-pixel grid; triangles from
        // slivers to larger than the image, partly outside it.
        let (w, h) = (37u32, 29u32);
        let mut fast = Rasterizer::new(w, h);
        let mut slow = Rasterizer::new(w, h);
        for i in 0..2000u32 {
            let scale = [2.0f32, 10.0, 60.0][i as usize % 3];
            let centre = [
                rng.random_range(-5.0..42.0f32),
                rng.random_range(-5.0..34.0f32),
            ];
            let mut vertex = || {
                [
                    centre[0] + rng.random_range(-scale..scale),
                    centre[1] + rng.random_range(-scale..scale),
                    rng.random_range(0.1..10.0f32),
                ]
            };
            let (a, b, c) = (vertex(), vertex(), vertex());
            fast.fill(a, b, c, i);
            reference_fill(&mut slow, a, b, c, i);
        }
        assert_eq!(fast.depth, slow.depth);
        assert_eq!(fast.color, slow.color);
        assert!(
            fast.color.iter().filter(|&&c| c != 0).count() > (w * h) as usize / 2,
            "the test triangles cover most of the image"
        );
    }
}
