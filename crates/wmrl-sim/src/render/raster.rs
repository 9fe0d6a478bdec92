//! The z-buffer rasteriser: world → camera transform, near-plane clipping,
//! perspective projection, edge-function scan conversion with 1/z depth, and
//! flat Lambert shading (ambient 0.4 + 0.6·max(0, n·l)).

use image::RgbImage;
use nalgebra::{Isometry3, Point3, Vector3};

use super::MeshSet;
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
    cam_verts: Vec<[f32; 3]>,
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
            cam_verts: Vec::new(),
        }
    }

    /// Renders `meshes` of `world` seen from `camera`.
    pub fn render(&mut self, world: &SimWorld, meshes: &MeshSet, camera: &Camera) -> RgbImage {
        let (w, h) = (self.width, self.height);
        let mut img = RgbImage::new(w, h);
        // Sky gradient background.
        for (y, row) in img.rows_mut().enumerate() {
            let t = y as f32 / h as f32;
            let c = [
                (175.0 + 40.0 * t) as u8,
                (190.0 + 30.0 * t) as u8,
                (215.0 + 20.0 * t) as u8,
            ];
            for px in row {
                px.0 = c;
            }
        }
        self.depth.fill(0.0); // stores 1/depth; 0 = infinitely far
        let f = (h as f32 / 2.0) / ((camera.fovy_deg.to_radians() / 2.0).tan() as f32);
        let (cx, cy) = (w as f32 / 2.0, h as f32 / 2.0);
        let view = camera.pose.inverse();
        let light = {
            let l = Vector3::new(LIGHT[0], LIGHT[1], LIGHT[2]).normalize();
            let lc = view.rotation.cast::<f32>() * l;
            [lc.x, lc.y, lc.z]
        };
        let buf = img.as_mut();
        for mesh in meshes.meshes.iter() {
            let m: Isometry3<f32> =
                (view * to_iso(world.world.bodies[mesh.body].position())).cast();
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
                let color = [
                    (mesh.color[0] as f32 * shade).min(255.0) as u8,
                    (mesh.color[1] as f32 * shade).min(255.0) as u8,
                    (mesh.color[2] as f32 * shade).min(255.0) as u8,
                ];
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
                    self.fill(buf, p0, proj(poly[i]), proj(poly[i + 1]), color);
                }
            }
        }
        img
    }

    fn fill(&mut self, buf: &mut [u8], a: [f32; 3], b: [f32; 3], c: [f32; 3], color: [u8; 3]) {
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
        // Edge functions are affine in the pixel centre: evaluate them once at
        // the bounding box's corner and step by their x/y increments.
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
        for row in 0..=(max_y - min_y) {
            let fy = row as f32;
            let mut w0 = e0 + e0y * fy;
            let mut w1 = e1 + e1y * fy;
            let row_start = (min_y + row) as usize * width;
            for x in min_x..=max_x {
                let w2 = 1.0 - w0 - w1;
                if w0 >= 0.0 && w1 >= 0.0 && w2 >= 0.0 {
                    let iz = w0 * a[2] + w1 * b[2] + w2 * c[2];
                    let idx = row_start + x as usize;
                    if iz > self.depth[idx] {
                        self.depth[idx] = iz;
                        buf[idx * 3..idx * 3 + 3].copy_from_slice(&color);
                    }
                }
                w0 += e0x;
                w1 += e1x;
            }
        }
    }
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
